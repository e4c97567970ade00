"""A cheap password hasher for the suite, readable by the hub's own.

Its hashes are ordinary `pbkdf2_sha256` ones with fewer iterations (the count is part of the
hash), so a hub started in another process by a test verifies them with its default hasher.
"""

from django.contrib.auth.hashers import PBKDF2PasswordHasher


class QuickPBKDF2PasswordHasher(PBKDF2PasswordHasher):
    iterations = 1_000
