"""Hand-made protobuf for the raw clients of sbxd.sock (tests/proto/fake-peer.py,
tests/integration/raw-client.py): field numbers come from proto/sbx.proto."""


def varint(n):
    n &= (1 << 64) - 1          # a negative int32/int64 is its 64-bit two's complement
    out = b''
    while True:
        b = n & 0x7f
        n >>= 7
        if n:
            out += bytes([b | 0x80])
        else:
            return out + bytes([b])


def field(num, wt, payload):
    """Wire type 0 (payload an int) or 2 (payload bytes)."""
    tag = varint((num << 3) | wt)
    return tag + (varint(payload) if wt == 0 else varint(len(payload)) + payload)


def msg(type_, body_field, body=b''):
    """An sbx.Msg: its type and the body in the oneof field for it."""
    return field(1, 0, type_) + field(body_field, 2, body)


def read_varint(buf, i):
    n = shift = 0
    while True:
        b = buf[i]
        i += 1
        n |= (b & 0x7f) << shift
        shift += 7
        if not b & 0x80:
            return n, i


def decode(buf):
    """{field number: its last value}: an int for a varint, bytes otherwise."""
    out, i = {}, 0
    while i < len(buf):
        key, i = read_varint(buf, i)
        num, wt = key >> 3, key & 7
        if wt == 0:
            out[num], i = read_varint(buf, i)
        elif wt == 1:
            out[num], i = buf[i:i + 8], i + 8
        elif wt == 2:
            n, i = read_varint(buf, i)
            out[num], i = buf[i:i + n], i + n
        elif wt == 5:
            out[num], i = buf[i:i + 4], i + 4
        else:
            raise ValueError('wire type %d' % wt)
    return out
