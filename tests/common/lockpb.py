"""Python messages and stubs for v3lockpb and v3electionpb.

python3-etcd3 ships no stubs for the Lock and Election services and
grpc_tools is not installed, so the two protos (proto/v3lockpb,
proto/v3electionpb) are declared here as FileDescriptorProtos on top of
etcd3's rpc.proto / kv.proto, and the message classes come from
protobuf's message factory.  The field numbers are the protos'.
"""

from google.protobuf import descriptor_pb2, descriptor_pool
from google.protobuf import message_factory
from etcd3.etcdrpc import rpc_pb2  # noqa: F401  (registers rpc.proto)

_F = descriptor_pb2.FieldDescriptorProto
_BYTES, _INT64, _MSG = _F.TYPE_BYTES, _F.TYPE_INT64, _F.TYPE_MESSAGE

LOCK = {
    "LockRequest": [("name", 1, _BYTES), ("lease", 2, _INT64)],
    "LockResponse": [("header", 1, ".etcdserverpb.ResponseHeader"),
                     ("key", 2, _BYTES)],
    "UnlockRequest": [("key", 1, _BYTES)],
    "UnlockResponse": [("header", 1, ".etcdserverpb.ResponseHeader")],
}
ELECTION = {
    "CampaignRequest": [("name", 1, _BYTES), ("lease", 2, _INT64),
                        ("value", 3, _BYTES)],
    "CampaignResponse": [("header", 1, ".etcdserverpb.ResponseHeader"),
                         ("leader", 2, ".v3electionpb.LeaderKey")],
    "LeaderKey": [("name", 1, _BYTES), ("key", 2, _BYTES),
                  ("rev", 3, _INT64), ("lease", 4, _INT64)],
    "LeaderRequest": [("name", 1, _BYTES)],
    "LeaderResponse": [("header", 1, ".etcdserverpb.ResponseHeader"),
                       ("kv", 2, ".mvccpb.KeyValue")],
    "ResignRequest": [("leader", 1, ".v3electionpb.LeaderKey")],
    "ResignResponse": [("header", 1, ".etcdserverpb.ResponseHeader")],
    "ProclaimRequest": [("leader", 1, ".v3electionpb.LeaderKey"),
                        ("value", 2, _BYTES)],
    "ProclaimResponse": [("header", 1, ".etcdserverpb.ResponseHeader")],
}


def _file(name, package, messages):
    fd = descriptor_pb2.FileDescriptorProto(name=name, package=package,
                                            syntax="proto3")
    fd.dependency.extend(["rpc.proto", "kv.proto"])
    for mname, fields in messages.items():
        m = fd.message_type.add(name=mname)
        for fname, num, typ in fields:
            f = m.field.add(name=fname, number=num, label=_F.LABEL_OPTIONAL)
            if isinstance(typ, str):
                f.type, f.type_name = _MSG, typ
            else:
                f.type = typ
    return fd


def _classes(fd):
    pool = descriptor_pool.Default()
    try:
        fdesc = pool.FindFileByName(fd.name)
    except KeyError:
        fdesc = pool.Add(fd) or pool.FindFileByName(fd.name)
    out = {}
    for name in fdesc.message_types_by_name:
        desc = fdesc.message_types_by_name[name]
        out[name] = message_factory.MessageFactory(pool).GetPrototype(desc)
    return out


_L = _classes(_file("cetcd_test_v3lock.proto", "v3lockpb", LOCK))
_E = _classes(_file("cetcd_test_v3election.proto", "v3electionpb",
                    ELECTION))
globals().update(_L)
globals().update(_E)


class LockStub:
    """v3lockpb.Lock on a grpc channel."""

    def __init__(self, channel):
        u = channel.unary_unary
        self.Lock = u("/v3lockpb.Lock/Lock",
                      request_serializer=_L["LockRequest"].SerializeToString,
                      response_deserializer=_L["LockResponse"].FromString)
        self.Unlock = u("/v3lockpb.Lock/Unlock",
                        request_serializer=_L["UnlockRequest"]
                        .SerializeToString,
                        response_deserializer=_L["UnlockResponse"]
                        .FromString)


class ElectionStub:
    """v3electionpb.Election on a grpc channel."""

    def __init__(self, channel):
        def u(method, req, resp):
            return channel.unary_unary(
                "/v3electionpb.Election/" + method,
                request_serializer=_E[req].SerializeToString,
                response_deserializer=_E[resp].FromString)
        self.Campaign = u("Campaign", "CampaignRequest", "CampaignResponse")
        self.Proclaim = u("Proclaim", "ProclaimRequest", "ProclaimResponse")
        self.Leader = u("Leader", "LeaderRequest", "LeaderResponse")
        self.Resign = u("Resign", "ResignRequest", "ResignResponse")
        self.Observe = channel.unary_stream(
            "/v3electionpb.Election/Observe",
            request_serializer=_E["LeaderRequest"].SerializeToString,
            response_deserializer=_E["LeaderResponse"].FromString)
