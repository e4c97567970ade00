"""Print the bytes the a2a-sdk 0.3 signs and verifies for an agent card: its
`canonicalize_agent_card` of the card (JSON, argv[1]) parsed as its 0.3 `AgentCard`."""

import sys

from a2a.types import AgentCard
from a2a.utils.helpers import canonicalize_agent_card

print(canonicalize_agent_card(AgentCard.model_validate_json(sys.argv[1])))
