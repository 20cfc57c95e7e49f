"""Policy models and training (torch / onnxruntime only; the interface lives in core)."""
