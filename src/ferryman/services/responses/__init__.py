"""The OpenAI Responses and Conversations APIs, on the same turn engine as the Agents API."""
