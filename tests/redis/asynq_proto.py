"""Asynq's ``TaskMessage`` written as asynq writes it (internal/base/base.go EncodeMessage:
``proto.Marshal`` of the message of internal/proto/asynq.proto), for the test fixtures only.

The message class is built at run time from a descriptor that repeats asynq.proto's field list (numbers,
types, the ``headers`` map), with the ``protobuf`` package (a test dependency): the same wire bytes the
Go code writes, without protoc. idemview itself reads them with its own wire-format reader
(:mod:`idemview.ledger.redis_kv.protobuf`)."""

from __future__ import annotations

from functools import cache

#: asynq.proto TaskMessage: name -> (number, descriptor type); 9 string, 12 bytes, 5 int32, 3 int64
TASK_MESSAGE = {
    "type": (1, 9),
    "payload": (2, 12),
    "id": (3, 9),
    "queue": (4, 9),
    "retry": (5, 5),
    "retried": (6, 5),
    "error_msg": (7, 9),
    "timeout": (8, 3),
    "deadline": (9, 3),
    "unique_key": (10, 9),
    "last_failed_at": (11, 3),
    "retention": (12, 3),
    "completed_at": (13, 3),
    "group_key": (14, 9),
}


@cache
def task_message_class():
    """The TaskMessage message class (``protobuf`` must be installed)."""
    from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

    fd = descriptor_pb2.FileDescriptorProto(name="idemview_test_asynq.proto", package="asynq", syntax="proto3")
    msg = fd.message_type.add(name="TaskMessage")
    for name, (num, typ) in TASK_MESSAGE.items():
        msg.field.add(name=name, number=num, type=typ, label=1)
    entry = msg.nested_type.add(name="HeadersEntry")
    entry.options.map_entry = True
    entry.field.add(name="key", number=1, type=9, label=1)
    entry.field.add(name="value", number=2, type=9, label=1)
    msg.field.add(name="headers", number=15, type=11, label=3, type_name=".asynq.TaskMessage.HeadersEntry")
    pool = descriptor_pool.DescriptorPool()
    pool.Add(fd)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("asynq.TaskMessage"))


def encode_task(**fields) -> bytes:
    """``proto.Marshal`` of a TaskMessage with ``fields`` (``headers`` a dict of text)."""
    cls = task_message_class()
    headers = fields.pop("headers", None) or {}
    m = cls(**fields)
    for k, v in headers.items():
        m.headers[k] = v
    return m.SerializeToString()
