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
proto/sbx.proto) by tests/proto/protowire.py.
"""
import json
import os
import socket
import struct
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'proto'))
from protowire import decode, field, msg  # noqa: E402

MAGIC = 0x53425800 | int(os.environ['SBX_PROTO_VERSION'])
T_HELLO, T_EXEC, T_READ_LINES, T_REPLY = 1, 6, 8, 64
OUTPUT_FIELDS = {1: 'command_session', 2: 'workspace_session', 3: 'status', 5: 'exit_code', 7: 'end_reason',
                 10: 'start_offset', 11: 'end_offset', 12: 'total_lines', 13: 'original_token_count', 14: 'output'}


def put(num, value):
    """One field of a request: an int or bool as a varint, a str as bytes."""
    if isinstance(value, (bool, int)):
        return field(num, 0, int(value))
    return field(num, 2, value.encode())


class Client:
    def __init__(self, path):
        self.s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.s.settimeout(30)
        self.s.connect(path)
        self.seq = 0
        self.last = None
        self.call(T_HELLO, 10, put(1, 'raw-client'))

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
            body = put(1, r['sandbox']) + put(3, r['cmd']) + put(6, True) + put(7, r.get('yield_ms', 2000))
            if r.get('separate_streams'):
                body += put(8, True)
            out = self.call(T_EXEC, 15, body)
            self.last = out.get('command_session', self.last)
            return out
        if r['op'] == 'read':
            body = put(1, r['sandbox']) + put(2, cs) + put(3, r.get('start_offset', 0))
            body += put(4, True) + put(5, r.get('limit', 200))
            if r.get('stream'):
                body += put(6, r['stream'])
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
