"""What evaluate.py does beyond the evaluation itself, one module per option, each imported only
when its option is given (part of benchback-rl): video.py (--video), share.py (--export-onnx,
--hub-folder)."""
