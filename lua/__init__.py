"""Lua scripts shipped as package data (`service.lua`), loaded by service/scripts.py."""
