#!/usr/bin/env python3
"""A fake peer on sbxd.sock (tests/proto/run.sh starts a private sbxd).

Each case connects, sends hostile frames, and asserts that sbxd drops that
peer (EOF within a few seconds, after at most an error reply), then that a
second, well-behaved client is still served (HELLO, then STATUS answered).
Prints TAP and a final "N passed, N failed" line.

    fake-peer.py SOCKET PROTO_VERSION
"""
import os
import socket
import struct
import sys
import time

from protowire import field, msg

SOCK, VERSION = sys.argv[1], int(sys.argv[2])
MAGIC = 0x53425800
HDR = struct.Struct('<IIHHI')
T_HELLO, T_STATUS, T_EXEC, T_FILE_WRITE, T_REPLY = 1, 5, 6, 11, 64


HELLO = msg(T_HELLO, 10, field(1, 2, b'fake-peer'))
STATUS = msg(T_STATUS, 14)
EXEC = msg(T_EXEC, 15, field(1, 2, b'nosuch') + field(3, 2, b'true'))


def frame(body, type_, seq=1, version=VERSION, length=None, flags=0, magic=MAGIC):
    return HDR.pack(magic | version, len(body) if length is None else length, type_, flags, seq) + body


def connect():
    s = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    s.settimeout(5)
    s.connect(SOCK)
    return s


def dropped(s, timeout=5.0):
    """True if the peer reaches EOF (or a reset) within timeout; replies before it are allowed."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        s.settimeout(max(0.05, deadline - time.monotonic()))
        try:
            data = s.recv(1 << 20)
        except socket.timeout:
            return False
        except (ConnectionResetError, BrokenPipeError):
            return True
        if not data:
            return True
    return False


def served():
    """A well-behaved client: HELLO then STATUS, both answered with a REPLY without error."""
    s = connect()
    try:
        for seq, body, t in ((1, HELLO, T_HELLO), (2, STATUS, T_STATUS)):
            s.send(frame(body, t, seq=seq))
            data = s.recv(1 << 20)
            if len(data) < HDR.size:
                return False
            magic, length, type_, flags, rseq = HDR.unpack_from(data)
            if type_ != T_REPLY or rseq != seq:
                return False
        return True
    finally:
        s.close()


def send_with_fds(s, data, n):
    fds = [os.open('/dev/null', os.O_RDONLY) for _ in range(n)]
    try:
        socket.send_fds(s, [data], fds)
    finally:
        for fd in fds:
            os.close(fd)


CASES = []


def case(name):
    def reg(fn):
        CASES.append((name, fn))
        return fn
    return reg


@case('a length field larger than the datagram')
def _(s):
    s.send(frame(HELLO, T_HELLO, length=len(HELLO) + 100))


@case('a length field over the frame cap (0xffffffff)')
def _(s):
    s.send(frame(b'x' * 16, T_HELLO, length=0xffffffff))


@case('a datagram over the frame cap (200 KiB)')
def _(s):
    s.send(frame(b'\0' * (200 * 1024), T_HELLO))


@case('an unknown message type (999)')
def _(s):
    s.send(frame(HELLO, 999))


@case('a type the client may not send (a worker message)')
def _(s):
    s.send(frame(HELLO, T_HELLO))
    s.recv(1 << 20)
    s.send(frame(msg(201, 41, field(1, 0, 1) + field(2, 2, b'x')), 201, seq=2))


@case('a type that does not match the body')
def _(s):
    s.send(frame(HELLO, T_STATUS))


@case('a request before HELLO (wrong state)')
def _(s):
    s.send(frame(EXEC, T_EXEC))


@case('a second HELLO (wrong state)')
def _(s):
    s.send(frame(HELLO, T_HELLO))
    s.recv(1 << 20)
    s.send(frame(HELLO, T_HELLO, seq=2))


@case('extra file descriptors on a message that takes none')
def _(s):
    s.send(frame(HELLO, T_HELLO))
    s.recv(1 << 20)
    send_with_fds(s, frame(STATUS, T_STATUS, seq=2, flags=2), 2)


@case('file descriptors the header does not declare')
def _(s):
    s.send(frame(HELLO, T_HELLO))
    s.recv(1 << 20)
    send_with_fds(s, frame(STATUS, T_STATUS, seq=2, flags=0), 1)


@case('more file descriptors than any message takes (8)')
def _(s):
    send_with_fds(s, frame(HELLO, T_HELLO, flags=8), 8)


@case('a truncated header (10 bytes)')
def _(s):
    s.send(frame(HELLO, T_HELLO)[:10])


@case('a truncated body')
def _(s):
    s.send(frame(HELLO, T_HELLO)[:-4])


@case('a body that is not protobuf')
def _(s):
    s.send(frame(b'\xff' * 40, T_HELLO))


@case('a wrong protocol version')
def _(s):
    s.send(frame(HELLO, T_HELLO, version=(VERSION + 1) & 0xff))


@case('a wrong magic')
def _(s):
    s.send(frame(HELLO, T_HELLO, magic=0x12345600))


@case('an empty datagram')
def _(s):
    s.send(b'')


def main():
    print('TAP version 13')
    print(f'1..{len(CASES) + 1}')
    passed = failed = 0
    n = 0
    if served():
        print(f'ok {n + 1} - a well-behaved client is served')
        passed += 1
    else:
        print(f'not ok {n + 1} - a well-behaved client is served')
        failed += 1
    n += 1
    for name, fn in CASES:
        n += 1
        why = ''
        try:
            s = connect()
            try:
                fn(s)
                ok_drop = dropped(s)
            finally:
                s.close()
            ok_serve = served()
            if not ok_drop:
                why = 'the peer was not dropped'
            elif not ok_serve:
                why = 'the next client was not served'
        except OSError as e:
            why = f'{type(e).__name__}: {e}'
            try:
                if served():
                    why = ''  # sbxd closed on us mid-send: dropped, and still serving
            except OSError as e2:
                why += f'; next client: {e2}'
        if why:
            print(f'not ok {n} - {name}: dropped, others served  # {why}')
            failed += 1
        else:
            print(f'ok {n} - {name}: dropped, others served')
            passed += 1
    print(f'{passed} passed, {failed} failed')
    return 1 if failed else 0


sys.exit(main())
