"""Identity providers the hub trusts: an agent may call with its provider's JWT instead of a
hub token, when an issuer is trusted and one of the token's claims maps to the agent."""

from __future__ import annotations

from django.db import models

from .agent import Agent


class TrustedIssuer(models.Model):
    # The token's `iss`, exactly.
    issuer = models.CharField(max_length=500, unique=True)
    jwks_url = models.URLField(max_length=500)
    # The token's `aud` must hold this value.
    audience = models.CharField(max_length=500)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["issuer"]

    def __str__(self) -> str:
        return self.issuer


class IssuerMapping(models.Model):
    """A token of `issuer` whose claim `claim` equals `value` is the agent `agent`."""

    issuer = models.ForeignKey(TrustedIssuer, on_delete=models.CASCADE, related_name="mappings")
    claim = models.CharField(max_length=100, default="sub")
    value = models.CharField(max_length=500)
    agent = models.ForeignKey(Agent, on_delete=models.CASCADE, related_name="identities")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["issuer", "claim", "value"]
        constraints = [
            models.UniqueConstraint(
                fields=["issuer", "claim", "value"], name="issuer_mapping_claim_value"
            )
        ]

    def __str__(self) -> str:
        return f"{self.issuer} {self.claim}={self.value} -> {self.agent}"
