"""skyward-torch: PyTorch and Hugging Face distributed backends."""
