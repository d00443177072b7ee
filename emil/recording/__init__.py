"""Session recordings: typed JSONL records (``records``), an append-only writer (``writer``) and
a tolerant reader (``reader``); this package's API is the names below.

Every line of a recording is one JSON object with a ``kind`` literal. One pydantic
:data:`RECORD_ADAPTER` turns records into JSON and back, and every field after the first
version has a default, so older files keep loading (the schema is in docs/recording.md).

A recording is self-sufficient for replay: each message's full content is written once, as a
``message`` record, when it first appears (history messages carry their history ``id``; other
prompt parts such as the system prompt or a memory note get a ``ref`` of their own), and each
``request`` lists the ``refs`` of the messages it sent, in order. The system prompt and the
tool specs are in the header.

The writer flushes every record, so a killed process loses at most its last, partial line;
:func:`read_recording` stops at the first line it cannot read and says where. A new session
never appends to an existing file unless asked to, and then repairs a torn tail first
(:class:`Recorder`), so a file holding several sessions reads to its end.
"""

from emil.context.ladder import TrimRecord
from emil.recording.reader import (
    RecordingRead,
    check_recording_file,
    messages_for_request,
    read_recording,
)
from emil.recording.records import (
    CONFIRMED_COMMAND,
    RECORD_ADAPTER,
    SCHEMA_VERSION,
    CompletionRecord,
    EndRecord,
    ErrorRecord,
    EventRecord,
    HeaderRecord,
    MessageRecord,
    ObservationRecord,
    OverflowRecord,
    Record,
    RecordedToolCall,
    RecoveryRecord,
    RequestRecord,
    RetryRecord,
    ServiceRecord,
    SummaryRecord,
    ToolResultRecord,
    TurnRecord,
    UnknownRecord,
    outage_record,
)
from emil.recording.writer import (
    Recorder,
    RecordingExists,
    repair_tail,
)

__all__ = [
    "CONFIRMED_COMMAND",
    "RECORD_ADAPTER",
    "SCHEMA_VERSION",
    "CompletionRecord",
    "EndRecord",
    "ErrorRecord",
    "EventRecord",
    "HeaderRecord",
    "MessageRecord",
    "ObservationRecord",
    "OverflowRecord",
    "Record",
    "RecordedToolCall",
    "Recorder",
    "RecordingExists",
    "RecordingRead",
    "RecoveryRecord",
    "RequestRecord",
    "RetryRecord",
    "ServiceRecord",
    "SummaryRecord",
    "ToolResultRecord",
    "TrimRecord",
    "TurnRecord",
    "UnknownRecord",
    "check_recording_file",
    "messages_for_request",
    "outage_record",
    "read_recording",
    "repair_tail",
]
