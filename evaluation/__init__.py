"""evaluate.py's modules (part of benchback-rl): model_file.py (model.safetensors read back and
checked whole, its header first), policy.py (the policy in each framework's own network),
eval_file.py (eval.json, read and merged), progress.py (the "wrote PATH" and progress lines), and
one module per option, each imported only when its option is given: video.py (--video), share.py
(--export-onnx), hub.py (--hub-folder)."""
