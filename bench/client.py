#!/usr/bin/env python3
"""Send N keep-alive GET requests on one connection and check every status.

usage: client.py PORT N USER-AGENT [PATH] [SOURCE-ADDRESS] [XFF-COUNT [XFF-FIRST]]
A "{n}" in USER-AGENT is replaced by the request's number, so that every
request sends a User-Agent the server has not seen; "{n%K}" by the number
modulo K, a pool of K User-Agents in turn. USER-AGENT "random:FIRST" sends
User-Agent number FIRST + i of a fixed sequence of random strings (60 to 160
letters, digits, spaces and punctuation; the same for every run), so that two
runs, or two servers, see exactly the same ones. A random string may name a
refused agent by chance (with the shipped catalogue of 2,550 agents, about
1.6 in 10,000 spell a scanner's or a library's token where a product
stands): the server then closes the connection, and the client connects
again and goes on with the next one; more than 5 in 10,000 is an error. With XFF-COUNT K > 0,
request i sends "X-Forwarded-For: " the address number XFF-FIRST + (i % K)
(XFF-FIRST defaults to 1) of 10.0.0.0/8, where number 1 is 10.0.0.1, for
a realip configuration.
SOURCE-ADDRESS may be "" for none. With BENCH_COOKIE set in the environment,
every request sends "Cookie: " its value (a returning session); with
BENCH_HEADERS, its lines as more header lines (a signed request). BENCH_FIRST
numbers the first request (0 by default), for "{n}" and "{n%K}": a run after
a warm-up of W requests starts at W, so that its "{n}" are new still.
"""
import os
import random
import re
import socket
import string
import sys

ALPHABET = string.ascii_letters + string.digits + " ;:()/.,_-+"


def addr(i):
    return f"10.{i >> 16 & 255}.{i >> 8 & 255}.{i & 255}"


def random_ua(i):
    rng = random.Random(i)
    text = "".join(rng.choices(ALPHABET, k=rng.randint(60, 160)))
    # nginx trims the spaces around a header value
    return "x" + text.strip() + "x"


def user_agent(template, i):
    if template.startswith("random:"):
        return random_ua(int(template[len("random:"):]) + i)
    i += int(os.environ.get("BENCH_FIRST", "0"))
    text = re.sub(r"\{n%(\d+)\}", lambda m: str(i % int(m.group(1))), template)
    return text.replace("{n}", str(i))


def main():
    port, n, ua = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
    path = sys.argv[4] if len(sys.argv) > 4 else "/"
    source = sys.argv[5] if len(sys.argv) > 5 and sys.argv[5] else None
    xff = int(sys.argv[6]) if len(sys.argv) > 6 else 0
    first = int(sys.argv[7]) if len(sys.argv) > 7 else 1
    random_agents = ua.startswith("random:")

    def connect():
        s = socket.create_connection(("127.0.0.1", port), timeout=60, source_address=(source, 0) if source else None)
        s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return s, s.makefile("rb")

    s, f = connect()
    rotate = "{n" in ua or random_agents
    statuses = {}
    req = None
    for i in range(n):
        if req is None or rotate or xff:
            head = f"GET {path} HTTP/1.1\r\nHost: localhost\r\nUser-Agent: {user_agent(ua, i)}\r\n"
            if xff:
                head += f"X-Forwarded-For: {addr(first + i % xff)}\r\n"
            if os.environ.get("BENCH_COOKIE"):
                head += f"Cookie: {os.environ['BENCH_COOKIE']}\r\n"
            for extra in os.environ.get("BENCH_HEADERS", "").splitlines():
                head += f"{extra}\r\n"
            req = (head + "\r\n").encode()
        s.sendall(req)
        line = f.readline()
        if not line and random_agents:
            statuses["closed"] = statuses.get("closed", 0) + 1
            s.close()
            s, f = connect()
            continue
        status = line.split()[1].decode()
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
    if set(statuses) - {"closed"} != {"200"} or statuses.get("closed", 0) > n // 2000 + 1:
        sys.exit(f"unexpected statuses: {statuses}")
    if "closed" in statuses:
        print(f"client.py: {statuses['closed']} of {n} random User-Agents named a refused agent", file=sys.stderr)


if __name__ == "__main__":
    main()
