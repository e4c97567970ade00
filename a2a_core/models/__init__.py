"""The hub's persistence, one module per aggregate, re-exported here."""

from .agent import (
    DEFAULT_SCOPES,
    Agent,
    AgentCardVersion,
    AgentStatus,
    DeliveryMode,
    Scope,
    Skill,
    SkillTag,
)
from .audit import AuditEvent
from .escalation import (
    PRIORITY_RANK,
    Escalation,
    EscalationKind,
    EscalationStatus,
    Priority,
)
from .follow import TaskFollow
from .identity import IssuerMapping, TrustedIssuer
from .inbox import InboxSession, Transport
from .ledger import LedgerCheckpoint, LedgerEntry, LedgerHead, LedgerKind, LedgerNode
from .message import WAITING_STATES, Decision, Delivery, DeliveryState, Direction, Message
from .notify import (
    Notification,
    NotificationState,
    NotificationTarget,
    NotifyEvent,
    NotifyKeyUse,
    TargetKind,
    WebhookFormat,
)
from .policy import BreakerState, PolicyCounter, PolicyVersion
from .push import PushNotificationConfig
from .replay import ReplayItem, ReplaySet, ReplayStatus
from .task import (
    ACTIVE_STATE_LIST,
    ACTIVE_STATES,
    ALLOWED_TRANSITIONS,
    INTERRUPTED_STATES,
    TASK_STATES,
    TERMINAL_STATES,
    Artifact,
    Task,
    TaskEvent,
    TaskEventKind,
    TaskState,
)

__all__ = [
    "ACTIVE_STATES",
    "ACTIVE_STATE_LIST",
    "ALLOWED_TRANSITIONS",
    "DEFAULT_SCOPES",
    "INTERRUPTED_STATES",
    "PRIORITY_RANK",
    "TASK_STATES",
    "TERMINAL_STATES",
    "WAITING_STATES",
    "Agent",
    "AgentCardVersion",
    "AgentStatus",
    "Artifact",
    "AuditEvent",
    "BreakerState",
    "Decision",
    "Delivery",
    "DeliveryMode",
    "DeliveryState",
    "Direction",
    "Escalation",
    "EscalationKind",
    "EscalationStatus",
    "InboxSession",
    "IssuerMapping",
    "LedgerCheckpoint",
    "LedgerEntry",
    "LedgerHead",
    "LedgerKind",
    "LedgerNode",
    "Message",
    "Notification",
    "NotificationState",
    "NotificationTarget",
    "NotifyEvent",
    "NotifyKeyUse",
    "PolicyCounter",
    "PolicyVersion",
    "Priority",
    "PushNotificationConfig",
    "ReplayItem",
    "ReplaySet",
    "ReplayStatus",
    "Scope",
    "Skill",
    "SkillTag",
    "TargetKind",
    "Task",
    "TaskEvent",
    "TaskEventKind",
    "TaskFollow",
    "TaskState",
    "Transport",
    "TrustedIssuer",
    "WebhookFormat",
]
