"""Interop tooling: drivers for the real C++ client and ali-ons, frame capture (see README.md)."""
