"""The system's vocabulary: every state change is one of these event bodies.

Each body is a frozen msgspec Struct registered under a wire name (``area.what_happened``) and a
schema version. The envelope that carries it in the log (``seq``, time, type, version, checksum)
lives in :mod:`events.codec`.
"""

from __future__ import annotations

from ._base import (
    EventBody,
    Outcome,
    Request,
    UnknownEventType,
    Upcaster,
    event,
    event_class,
    registered_types,
    unregister,
    upcaster,
    upcasters_for,
)
from .episode import (
    NOT_RUN,
    AgentTurnTaken,
    CheckResult,
    EpisodeFinalChosen,
    EpisodeFinished,
    EpisodeJobSubmitted,
    EpisodeLimitsSet,
    EpisodeStarted,
    SubmissionReceived,
    SubmissionRejected,
    SubmissionValidated,
    ToolCalled,
    ToolReturned,
    WorkspaceFileWritten,
)
from .fleet import (
    PodCheck,
    PodCreated,
    PodIdle,
    PodLost,
    PodProvisionFailed,
    PodReady,
    PodRequested,
    PodSelfChecked,
    PodTerminated,
    PodTerminating,
)
from .job import (
    JobAssigned,
    JobCancelRequested,
    JobFailed,
    JobProgressed,
    JobQueued,
    JobRequeued,
    JobStarted,
    JobStoppedEarly,
    JobSucceeded,
)
from .learning import (
    BaselineFrozen,
    BatchCollected,
    BatchStarted,
    EpisodeStaleDiscarded,
    GroupClosedShort,
    GroupStarted,
    LoRAStepApplied,
    RewardComputed,
    SamplerPublished,
)
from .money import BudgetSet, CostRefused, CostReleased, CostReserved, CostSettled
from .record import Recorded
from .run import RunFinished, RunResumed, RunStarted, RunWiring, SandboxOptedOut

# The tagged union of the whole vocabulary: the envelope's ``type`` is the tag.
Event = (
    RunStarted
    | RunResumed
    | RunFinished
    | RunWiring
    | SandboxOptedOut
    | EpisodeStarted
    | AgentTurnTaken
    | ToolCalled
    | ToolReturned
    | WorkspaceFileWritten
    | SubmissionReceived
    | SubmissionValidated
    | SubmissionRejected
    | EpisodeFinished
    | JobQueued
    | JobAssigned
    | JobStarted
    | JobProgressed
    | JobStoppedEarly
    | JobSucceeded
    | JobFailed
    | JobRequeued
    | JobCancelRequested
    | PodRequested
    | PodProvisionFailed
    | PodReady
    | PodSelfChecked
    | PodIdle
    | PodLost
    | PodTerminated
    | PodCreated
    | PodTerminating
    | CostReserved
    | CostSettled
    | CostRefused
    | CostReleased
    | BudgetSet
    | RewardComputed
    | BaselineFrozen
    | BatchStarted
    | BatchCollected
    | EpisodeStaleDiscarded
    | GroupStarted
    | GroupClosedShort
    | LoRAStepApplied
    | SamplerPublished
)

__all__ = [
    "NOT_RUN",
    "AgentTurnTaken",
    "BaselineFrozen",
    "BatchCollected",
    "BatchStarted",
    "BudgetSet",
    "CheckResult",
    "CostRefused",
    "CostReleased",
    "CostReserved",
    "CostSettled",
    "EpisodeFinalChosen",
    "EpisodeFinished",
    "EpisodeJobSubmitted",
    "EpisodeLimitsSet",
    "EpisodeStaleDiscarded",
    "EpisodeStarted",
    "Event",
    "EventBody",
    "GroupClosedShort",
    "GroupStarted",
    "JobAssigned",
    "JobCancelRequested",
    "JobFailed",
    "JobProgressed",
    "JobQueued",
    "JobRequeued",
    "JobStarted",
    "JobStoppedEarly",
    "JobSucceeded",
    "LoRAStepApplied",
    "Outcome",
    "PodCheck",
    "PodCreated",
    "PodIdle",
    "PodLost",
    "PodProvisionFailed",
    "PodReady",
    "PodRequested",
    "PodSelfChecked",
    "PodTerminated",
    "PodTerminating",
    "Recorded",
    "Request",
    "RewardComputed",
    "RunFinished",
    "RunResumed",
    "RunStarted",
    "RunWiring",
    "SamplerPublished",
    "SandboxOptedOut",
    "SubmissionReceived",
    "SubmissionRejected",
    "SubmissionValidated",
    "ToolCalled",
    "ToolReturned",
    "UnknownEventType",
    "Upcaster",
    "WorkspaceFileWritten",
    "event",
    "event_class",
    "registered_types",
    "unregister",
    "upcaster",
    "upcasters_for",
]
