"""The systems a user would pick instead of Skyward, behind one small protocol."""
