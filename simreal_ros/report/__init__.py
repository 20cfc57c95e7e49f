"""Offline reports and the recording sub-commands of ``simreal``."""
