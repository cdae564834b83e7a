"""Conversions of Redis data an older ferryman wrote, one layout version each, run once at open (see ``runner``)."""
