#!/usr/bin/env python3
"""Write a synthetic day of a public catalogue's access log, for bench/analyze
and the analyze tests: people browsing from many addresses, verified and
spoofed Googlebot, bingbot, GPTBot refused with 444, a scripting library, a
scraper network (198.51.100.0/24) rotating browser User-Agents over sort and
facet variants that robots.txt disallows, and an account-stuffing client on
/login.

  bench/analyze-log.py LINES [--format combined|crawlward] [--people N] [--seed S]

Lines go to standard output, in time order over 24 hours. The same
arguments always write the same log.
"""

import argparse
import random
import sys

CHROME = "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/{v}.0.0.0 Safari/537.36"
FIREFOX = "Mozilla/5.0 (X11; Linux x86_64; rv:{v}.0) Gecko/20100101 Firefox/{v}.0"
SAFARI = "Mozilla/5.0 (Macintosh; Intel Mac OS X 14_7) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/{v}.1 Safari/605.1.15"
HEADLESS = "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) HeadlessChrome/{v}.0.0.0 Safari/537.36"
GOOGLEBOT = "Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)"
BINGBOT = "Mozilla/5.0 (compatible; bingbot/2.0; +http://www.bing.com/bingbot.htm)"
GPTBOT = "Mozilla/5.0 AppleWebKit/537.36 (KHTML, like Gecko; compatible; GPTBot/1.2; +https://openai.com/gptbot)"
MONTHS = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]
START = (10, "Oct", 2026)


def stamp(sec):
    h, rest = divmod(sec, 3600)
    m, s = divmod(rest, 60)
    day = START[0] + h // 24
    return "%02d/%s/%d:%02d:%02d:%02d +0000" % (day, START[1], START[2], h % 24, m, s)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("lines", type=int)
    ap.add_argument("--format", choices=["combined", "crawlward"], default="combined")
    ap.add_argument("--people", type=int, default=20000, help="distinct addresses of people")
    ap.add_argument("--seed", type=int, default=2026)
    a = ap.parse_args()
    rnd = random.Random(a.seed)
    people = ["10.%d.%d.%d" % (1 + i // 64516 % 250, i // 254 % 254, 1 + i % 254) for i in range(a.people)]
    people_ua = [CHROME.format(v=v) for v in (129, 130, 131)] + [FIREFOX.format(v=133), SAFARI.format(v=18)]
    google = ["66.249.64.%d" % i for i in list(range(0, 32)) + list(range(128, 256))]
    scraper_ua = [CHROME.format(v=130), CHROME.format(v=131), HEADLESS.format(v=131), SAFARI.format(v=18)]
    # who sends each line, by share of the log
    kinds = (["person"] * 70 + ["googlebot"] * 10 + ["scraper"] * 10 + ["bingbot"] * 3
             + ["gptbot"] * 2 + ["spoofed"] * 2 + ["script"] * 2 + ["stuffing"] * 1)
    out = sys.stdout
    crawlward = a.format == "crawlward"
    buf = []
    last_stamp, last_sec = None, -1
    for n in range(a.lines):
        sec = n * 86400 // max(a.lines, 1)
        if sec != last_sec:
            last_stamp, last_sec = stamp(sec), sec
        kind = kinds[rnd.randrange(len(kinds))]
        referer, status, fields = "-", 200, None
        if kind == "person":
            who = rnd.randrange(len(people))
            ip = people[who]
            ua = people_ua[who % len(people_ua)]
            r = rnd.random()
            if r < 0.5:
                target = "/record/%d" % rnd.randrange(200000)
            elif r < 0.8:
                target = "/glam/browse?page=%d" % rnd.randrange(1, 50)
                referer = "https://heratio.org/glam/browse"
            else:
                target = "/static/site.css"
                status = 304
            agent, verdict, action = "", "none", "allow"
        elif kind == "googlebot":
            ip = google[rnd.randrange(len(google))]
            ua = GOOGLEBOT
            target = "/robots.txt" if rnd.random() < 0.001 else "/record/%d" % rnd.randrange(500000)
            agent, verdict, action = "Googlebot", "verified", "allow"
        elif kind == "spoofed":
            ip = "203.0.113.%d" % rnd.randrange(1, 255)
            ua = GOOGLEBOT
            target = "/record/%d" % rnd.randrange(500000)
            status = 444
            agent, verdict, action = "Googlebot", "spoofed", "block-444"
        elif kind == "bingbot":
            ip = "157.55.39.%d" % rnd.randrange(1, 255)
            ua = BINGBOT
            target = "/robots.txt" if rnd.random() < 0.002 else "/record/%d" % rnd.randrange(500000)
            agent, verdict, action = "bingbot", "unverified", "allow"
        elif kind == "gptbot":
            ip = "20.171.207.%d" % rnd.randrange(1, 255)
            ua = GPTBOT
            target = "/record/%d" % rnd.randrange(500000)
            status = 444
            agent, verdict, action = "GPTBot", "verified", "block-444"
        elif kind == "script":
            ip = "192.0.2.%d" % rnd.randrange(1, 20)
            ua = "python-requests/2.32.3"
            target = "/record/%d" % rnd.randrange(500000)
            status = 444
            agent, verdict, action = "python-requests", "unverified", "block-444"
        elif kind == "stuffing":
            ip = "192.0.2.200"
            ua = CHROME.format(v=131)
            target = "/login"
            status = 401 if rnd.random() < 0.95 else 200
            agent, verdict, action = "", "none", "allow"
        else:  # the scraper network: one client spread over a /24
            ip = "198.51.100.%d" % rnd.randrange(1, 255)
            ua = scraper_ua[rnd.randrange(len(scraper_ua))]
            target = "/glam/browse?sort=%s&subject=%d" % (rnd.choice(["title", "date", "id"]), rnd.randrange(100000))
            status = 429 if rnd.random() < 0.1 else 200
            agent, verdict, action = "", "none", "allow"
        line = '%s - - [%s] "GET %s HTTP/1.1" %d %d "%s" "%s"' % (ip, last_stamp, target, status, 0 if status >= 400 else 5120, referer, ua)
        if crawlward:
            upstream = "-" if status in (304, 444) else "%.3f" % (0.005 + rnd.random() * 0.2)
            line += ' rt=%.3f urt="%s" agent=%s verdict=%s action=%s refusal=%s' % (
                0.001 if upstream == "-" else float(upstream) + 0.001, upstream, agent, verdict, action,
                "bot-blocker" if status == 444 else ("rate" if status == 429 else ""))
        buf.append(line)
        if len(buf) >= 10000:
            out.write("\n".join(buf))
            out.write("\n")
            buf = []
    if buf:
        out.write("\n".join(buf))
        out.write("\n")


if __name__ == "__main__":
    main()
