"""The kinds of secret the local shield names, apart from the detectors that find them (``secrets.py``).

A registration's ``params.detect`` is checked against these when it is made, without
detect-secrets (and requests, which it imports: about 5 MiB together): those load
when a shield first inspects a message. ``secrets.py`` refuses to load if its
detectors name other kinds, or these in another order.
"""

SECRET_KINDS: tuple[str, ...] = (
    "private_key",
    "aws_access_key",
    "aws_secret_key",
    "azure_storage_key",
    "github_token",
    "gitlab_token",
    "slack_token",
    "stripe_key",
    "openai_key",
    "jwt",
    "discord_token",
    "mailchimp_key",
    "npm_token",
    "pypi_token",
    "sendgrid_key",
    "square_oauth_secret",
    "telegram_token",
    "twilio_key",
    "basic_auth",
    "secret_keyword",
    "high_entropy_string",
)
"""Every kind of secret a finding may name, most specific first (an earlier kind wins an overlapping span)."""
