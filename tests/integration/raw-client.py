#!/usr/bin/env python3
"""A small raw client of sbxd.sock, for requests the MCP tool sets do not make.

    raw-client.py SOCKET  < requests  > replies

SBX_PROTO_VERSION in the environment is the protocol version (the test reads
it from proto/wire.h). Each stdin line is one JSON request; each answer is one
JSON line on stdout, in order:

    {"op": "exec", "sandbox": S, "cmd": C, "separate_streams": B, "yield_ms": N}
    {"op": "read", "sandbox": S, "command_session": ID, "stream": 0|1|2,
     "start_offset": N, "limit": N}
    {"op": "wait", "sandbox": S, "command_session": ID}     read until not running

An answer is {"err": E, "errmsg": M} and, for a command-output reply, its
fields by name (output as text). "$last" as command_session is the id of the
last exec. Protobuf is encoded and decoded by hand (field numbers from
proto/sbx.proto), as tests/proto/fake-peer.py does.
"""
import json
import os
import socket
import struct
import sys
import time

MAGIC = 0x53425800 | int(os.environ['SBX_PROTO_VERSION'])
T_HELLO, T_EXEC, T_READ_LINES, T_REPLY = 1, 6, 8, 64
OUTPUT_FIELDS = {1: 'command_session', 2: 'workspace_session', 3: 'status', 5: 'exit_code', 7: 'end_reason',
                 10: 'start_offset', 11: 'end_offset', 12: 'total_lines', 13: 'original_token_count', 14: 'output'}


def varint(n):
    n &= (1 << 64) - 1
    out = b''
    while True:
        b = n & 0x7f
        n >>= 7
        if n:
            out += bytes([b | 0x80])
        else:
            return out + bytes([b])


def field(num, value):
    if isinstance(value, bool) or isinstance(value, int):
        return varint(num << 3) + varint(int(value))
    if isinstance(value, str):
        value = value.encode()
    return varint((num << 3) | 2) + varint(len(value)) + value


def msg(type_, body_field, body):
    return field(1, type_) + field(body_field, body)


def decode(buf):
    """{field number: last value}: ints for varints, bytes for length-delimited."""
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


def read_varint(buf, i):
    n = shift = 0
    while True:
        b = buf[i]
        i += 1
        n |= (b & 0x7f) << shift
        shift += 7
        if not b & 0x80:
            return n, i


class Client:
    def __init__(self, path):
        self.s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.s.settimeout(30)
        self.s.connect(path)
        self.seq = 0
        self.last = None
        self.call(T_HELLO, 10, field(1, 'raw-client'))

    def call(self, type_, body_field, body):
        self.seq += 1
        m = msg(type_, body_field, body)
        self.s.send(struct.pack('<IIHHI', MAGIC, len(m), type_, 0, self.seq) + m)
        while True:
            data = self.s.recv(1 << 20)
            if not data:
                raise EOFError('sbxd closed the connection')
            _, _, t, _, seq = struct.unpack('<IIHHI', data[:16])
            if t == T_REPLY and seq == self.seq:
                break
        reply = decode(decode(data[16:])[19])
        err = reply.get(1, 0)
        out = {'err': err - (1 << 64) if err >= 1 << 63 else err, 'errmsg': reply.get(2, b'').decode()}
        if 13 in reply:
            for num, value in decode(reply[13]).items():
                if num in OUTPUT_FIELDS:
                    out[OUTPUT_FIELDS[num]] = value.decode('utf-8', 'replace') if isinstance(value, bytes) else value
            for name in ('start_offset', 'end_offset', 'total_lines', 'output', 'status'):
                out.setdefault(name, '' if name in ('output', 'status') else 0)
        return out

    def request(self, r):
        cs = r.get('command_session', '')
        if cs == '$last':
            cs = self.last
        if r['op'] == 'exec':
            body = field(1, r['sandbox']) + field(3, r['cmd']) + field(6, True) + field(7, r.get('yield_ms', 2000))
            if r.get('separate_streams'):
                body += field(8, True)
            out = self.call(T_EXEC, 15, body)
            self.last = out.get('command_session', self.last)
            return out
        if r['op'] == 'read':
            body = field(1, r['sandbox']) + field(2, cs) + field(3, r.get('start_offset', 0))
            body += field(4, True) + field(5, r.get('limit', 200))
            if r.get('stream'):
                body += field(6, r['stream'])
            return self.call(T_READ_LINES, 17, body)
        if r['op'] == 'wait':
            deadline = time.monotonic() + 30
            while True:
                out = self.request({'op': 'read', 'sandbox': r['sandbox'], 'command_session': cs})
                if out['err'] or out['status'] != 'running' or time.monotonic() > deadline:
                    return out
                time.sleep(0.05)
        raise ValueError('unknown op %r' % r['op'])


def main():
    c = Client(sys.argv[1])
    for line in sys.stdin:
        if line.strip():
            print(json.dumps(c.request(json.loads(line))), flush=True)


main()
