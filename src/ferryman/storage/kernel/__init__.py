"""The storage kernel: what each backend implements once (see :class:`~.protocol.Kernel`)."""
