#!/usr/bin/env python3
"""Send N keep-alive GET requests on one connection and check every status.

usage: client.py PORT N USER-AGENT [PATH] [SOURCE-ADDRESS] [XFF-COUNT [XFF-FIRST]]
A "{n}" in USER-AGENT is replaced by the request's number, so that every
request sends a User-Agent the server has not seen. With XFF-COUNT K > 0,
request i sends "X-Forwarded-For: " the address number XFF-FIRST + (i % K)
(XFF-FIRST defaults to 1) of 10.0.0.0/8, where number 1 is 10.0.0.1, for
a realip configuration.
SOURCE-ADDRESS may be "" for none.
"""
import socket
import sys


def addr(i):
    return f"10.{i >> 16 & 255}.{i >> 8 & 255}.{i & 255}"


def main():
    port, n, ua = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
    path = sys.argv[4] if len(sys.argv) > 4 else "/"
    source = sys.argv[5] if len(sys.argv) > 5 and sys.argv[5] else None
    xff = int(sys.argv[6]) if len(sys.argv) > 6 else 0
    first = int(sys.argv[7]) if len(sys.argv) > 7 else 1
    s = socket.create_connection(("127.0.0.1", port), timeout=60, source_address=(source, 0) if source else None)
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    rotate = "{n}" in ua
    f = s.makefile("rb")
    statuses = {}
    req = None
    for i in range(n):
        if req is None or rotate or xff:
            head = f"GET {path} HTTP/1.1\r\nHost: localhost\r\nUser-Agent: {ua.replace('{n}', str(i))}\r\n"
            if xff:
                head += f"X-Forwarded-For: {addr(first + i % xff)}\r\n"
            req = (head + "\r\n").encode()
        s.sendall(req)
        status = f.readline().split()[1].decode()
        length = 0
        while True:
            line = f.readline()
            if line in (b"\r\n", b""):
                break
            if line.lower().startswith(b"content-length:"):
                length = int(line.split(b":")[1])
        f.read(length)
        statuses[status] = statuses.get(status, 0) + 1
    s.close()
    if set(statuses) != {"200"}:
        sys.exit(f"unexpected statuses: {statuses}")


if __name__ == "__main__":
    main()
