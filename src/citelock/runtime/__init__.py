"""The runtime shared by backends and judges.

llama.cpp, the OpenAI-compatible transport with its error map, server profiles, and a managed server.
"""
