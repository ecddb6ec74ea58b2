"""evaluate.py's modules (part of benchback-rl): model_file.py (model.safetensors read back and
checked whole), policy.py (the policy in each framework's own network), and one module per option,
each imported only when its option is given: video.py (--video), share.py (--export-onnx,
--hub-folder)."""
