"""Engine profiles: everything that differs between llama.cpp, vLLM and SGLang lives here.
"""
