"""The storage kernel on Redis (see :class:`~.kernel.RedisKernel`)."""
