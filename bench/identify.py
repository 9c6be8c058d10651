#!/usr/bin/env python3
"""How well crawlward knows who is asking, on public corpora of real User-Agent
strings, beside the best public bot lists measured on the same strings.

Run by bench/identify (which builds crawlward); writes the table to stdout
and, with --out, to a Markdown file. Corpora are downloaded (pinned versions,
checked against their published digests) into a cache directory; those on
GitHub can also be given as local checkouts (--github DIR, a directory of
clones named owner+name).

Categories, for each crawler corpus:
  named        the string names a catalogue agent (operator and purpose known)
  right purpose  ... with a purpose the corpus's own label allows
  bot          named, or an unknown bot (the detector)
  person       neither
  of them, phones  passed as a person, and a phone's or TV's string whose only
               bot words are in its model (the list holds it for a word)
  phones aside  named, and recognised as a bot, of the strings that are not
               such phones (what the targets are held to)
and for each browser corpus: called a bot, and refused by the default
policy (a purpose the defaults block, or a claim of an agent with
published ranges from an address outside them); and of them, the strings a
browser corpus holds that are bots by their operator's own account
(BOTS_IN_BROWSER_CORPORA: each with the reason), which the targets do not
count as browsers.
"""
import argparse, base64, collections, gzip, hashlib, io, json, os, re, shutil, subprocess, sys, tarfile, urllib.request, zipfile

import yaml

# npm packages: name, version, sha512 integrity (from the registry), licence, repository
NPM = {
    'crawler-user-agents': ('1.60.0', 'p8hKVsnZl3msolBhGW8s86V0tmmcuBSwhTXkzkegGQzTt0A/ysKDHKzek9fichfqL5qBEgDrR9CuGBU0Y7bDrg==', 'MIT', 'github.com/monperrus/crawler-user-agents'),
    'user-agents': ('2.1.198', 'cpFqEfpW1DW7MZYfJaknK5mNJZBgUwfroY0y1jSVy8Y93T4pmP0wp5HhXTOqZUbUbFppp0fwCyfttG9rsl3vqw==', 'BSD-2-Clause', 'github.com/intoli/user-agents'),
    'top-user-agents': ('2.1.138', 'yvN+LE7ZHoesZ1fWc0IfaYYQXGEbFtbxjC6D19SclswYlKoF6GKxJSvJbp4fsbya5BllROYml6osNlVCj1TAnw==', 'MIT', 'github.com/microlinkhq/top-user-agents'),
    'isbot': ('5.2.3', 'e8gGz3VzAuImtTMnB5PqNRRWGAswObTc+X+X5a8PttKT78VSSFec98w9ZwUoy6jJdlvJkVdLiN+WMgA8TewoZg==', 'Unlicense', 'github.com/omrilotan/isbot'),
    'device-detector-js': ('3.0.3', 'jM89LJAvP6uOd84at8OlD9dWP8KeYCCHUde0RT0HQo/stdoRH4b54Xl/fntx2nEXCmqiFhmo+/cJetS2VGUHPw==', 'LGPL-3.0', 'github.com/etienne-martin/device-detector-js'),
}
# PyPI: matomo device-detector's test fixtures, as the Python port ships them
PYPI = {'device_detector': ('6.5.1', 'a753fc24f7bdd54edfc1d78d08072c639a553dea109227a5644b39e9eed22583', 'MIT (the port); the fixtures are matomo-org/device-detector\'s, LGPL-3.0', 'github.com/thinkwelltwd/device_detector')}
# GitHub, at a commit: read from a local clone (--github) or raw.githubusercontent.com
GITHUB = {
    'ai-robots-txt/ai.robots.txt': ('738c80df2169027ce0e07c9976fd3f2f57dd8f7b', 'MIT', ['robots.json']),
    'omrilotan/isbot': ('344052da664bde49579e21f1e62349280791efb3', 'Unlicense', ['fixtures/crawlers.yml', 'fixtures/browsers.yml', 'fixtures/downloaded/myip.ms.json', 'fixtures/downloaded/user-agents.net.json', 'fixtures/downloaded/ua-parser-js.json', 'fixtures/downloaded/stephenafamo.json', 'fixtures/downloaded/kikobeats.json']),
    'JayBizzle/Crawler-Detect': ('f7926d40cb01c8f2488467dc0b476fd12d0359a8', 'MIT', ['tests/data/user_agent/crawlers.txt']),
}

# what a corpus's label allows of crawlward's purposes (None: any)
MONPERRUS_TAGS = {
    'search-engine': {'search', 'ai-search', 'crawler'}, 'seo': {'seo', 'monitor', 'crawler', 'research'},
    'advertising': {'seo', 'search', 'crawler'}, 'monitoring': {'monitor', 'scanner', 'seo', 'crawler'},
    'social-preview': {'preview', 'feed'}, 'feed-reader': {'feed', 'preview'}, 'ai-crawler': {'ai-training', 'ai-search', 'ai-user'},
    'scanner': {'scanner', 'research', 'monitor', 'crawler'}, 'archiver': {'archive'}, 'academic': {'research', 'crawler', 'archive'},
    'http-library': {'scripting', 'automation'}, 'browser-automation': {'automation', 'scripting'},
}
MATOMO_CATEGORIES = {
    'Search bot': {'search', 'ai-search'}, 'Site Monitor': {'monitor'}, 'Security Checker': {'scanner', 'research', 'monitor'},
    'Security search bot': {'scanner', 'research'}, 'AI Data Scraper': {'ai-training', 'ai-search', 'ai-user'},
    'AI Search Crawler': {'ai-search', 'search'}, 'AI Assistant': {'ai-user', 'ai-search'}, 'AI Agent': {'ai-user', 'ai-search'},
    'Feed Fetcher': {'feed', 'preview'}, 'Feed Reader': {'feed', 'preview'}, 'Feed Parser': {'feed', 'preview'},
    'Social Media Agent': {'preview', 'feed', 'seo'}, 'Validator': {'monitor', 'crawler', 'scanner'},
    'Read-it-later Service': {'archive', 'feed', 'preview'}, 'Benchmark': {'monitor'}, 'Network Monitor': {'monitor'}, 'Search tools': {'search', 'seo'},
}
# strings that a browser corpus holds but are not a person's browser, each by
# what its operator says it is (or by what it does); matched as substrings
BOTS_IN_BROWSER_CORPORA = {
    'Assetnote/': "Assetnote's attack-surface scanner (assetnote.io)",
    'Yahoo! Slurp': "Yahoo's search crawler (help.yahoo.com/help/us/ysearch/slurp)",
    'Amzn-User/': "Amazon's fetcher for a user's request to Alexa (developer.amazon.com/amazonbot)",
    '360JK yunjiankong': "Qihoo 360's website-monitoring service (jk.cloud.360.cn)",
    'HLB/': "Site24x7's website-defacement monitor, which appends HLB/<version> to a browser's string",
    '<?=print(': 'a PHP-injection probe written as a User-Agent',
    'PG_SLEEP(': 'an SQL-injection probe written as a User-Agent',
}
# the purposes the default policy refuses
BLOCKED = {'ai-training', 'seo', 'scanner', 'scripting', 'automation'}


def fetch(url, path):
    if not os.path.exists(path):
        with urllib.request.urlopen(url, timeout=60) as r, open(path + '.part', 'wb') as f:
            shutil.copyfileobj(r, f)
        os.rename(path + '.part', path)
    return path


def npm(cache, name):
    version, integrity, _, _ = NPM[name]
    path = fetch(f'https://registry.npmjs.org/{name}/-/{name}-{version}.tgz', os.path.join(cache, f'{name}-{version}.tgz'))
    digest = base64.b64encode(hashlib.sha512(open(path, 'rb').read()).digest()).decode()
    if digest != integrity:
        sys.exit(f'bench/identify: {path} does not match its registry digest')
    out = os.path.join(cache, f'{name}-{version}')
    if not os.path.isdir(out):
        with tarfile.open(path) as t:
            t.extractall(out, filter='data')
    return os.path.join(out, 'package')


def pypi(cache, name):
    version, sha256, _, _ = PYPI[name]
    wheels = [f for f in os.listdir(cache) if f.startswith(f'{name}-{version}') and f.endswith('.whl')]
    if not wheels:
        subprocess.run([sys.executable, '-m', 'pip', 'download', '-q', '--no-deps', '--only-binary', ':all:', f'{name}=={version}', '-d', cache], check=True)
        wheels = [f for f in os.listdir(cache) if f.startswith(f'{name}-{version}') and f.endswith('.whl')]
    path = os.path.join(cache, wheels[0])
    if hashlib.sha256(open(path, 'rb').read()).hexdigest() != sha256:
        sys.exit(f'bench/identify: {path} does not match its digest')
    return zipfile.ZipFile(path)


def github(cache, clones, repo, path):
    commit = GITHUB[repo][0]
    if clones:
        local = os.path.join(clones, repo.replace('/', '+'))
        # a clone, or a directory holding one as repo/ (the search tool's mirrors)
        if os.path.isdir(os.path.join(local, 'repo')):
            local = os.path.join(local, 'repo')
        if os.path.isdir(local):
            blob = subprocess.run(['git', '-C', local, 'show', f'{commit}:{path}'], capture_output=True)
            if blob.returncode == 0:
                return blob.stdout
    target = os.path.join(cache, repo.replace('/', '+') + '@' + commit[:12] + '+' + path.replace('/', '+'))
    try:
        return open(fetch(f'https://raw.githubusercontent.com/{repo}/{commit}/{path}', target), 'rb').read()
    except Exception as e:  # unreachable from here: the corpus is left out, and the table says so
        print(f'bench/identify: {repo}/{path} not available ({e}); its rows are left out', file=sys.stderr)
        return None


BOT_WORD = re.compile(r'bot|crawl|spider', re.I)
DEVICE_COMMENT = re.compile(r'\([^()]*(?:android|hbbtv|smart-?tv|tizen|web[o0]s)[^()]*\)', re.I)


def phone(ua):
    """A phone's or a TV's string whose every bot word is in its device comment
    (`(Linux; Android 6.0; CUBOT_NOTE_S Build/MRA58K)`): a person's, though a
    crawler list holds it."""
    words = [m.start() for m in BOT_WORD.finditer(ua)]
    comments = [m.span() for m in DEVICE_COMMENT.finditer(ua)]
    return bool(words) and all(any(a <= w < b for a, b in comments) for w in words)


def distinct(items):
    seen, out = set(), []
    for s in items:
        if isinstance(s, str):
            s = s.strip()
            if s and s not in seen and '\n' not in s and '\r' not in s:
                seen.add(s)
                out.append(s)
    return out


def crawlward(binary, uas):
    """crawlward identify's answer for each User-Agent: (name, purpose, verification, how)."""
    out = subprocess.run([binary, 'identify'], input='\n'.join(uas).encode('utf-8', 'surrogateescape') + b'\n', capture_output=True, check=True).stdout
    rows = [l.split('\t') for l in out.decode('utf-8', 'replace').split('\n')[:len(uas)]]
    return [(r[0], r[1], r[3], r[4]) for r in rows]


def node_peer(script, uas, cwd):
    """A peer's answer per User-Agent, from node: [recognised, named]."""
    out = subprocess.run(['node', '-e', script], input=json.dumps(uas).encode(), capture_output=True, check=True, cwd=cwd).stdout
    return json.loads(out)


ISBOT = "const {isbot}=require('./index.js');let s='';process.stdin.on('data',d=>s+=d).on('end',()=>{console.log(JSON.stringify(JSON.parse(s).map(u=>[isbot(u),false])))})"
DEVICE_DETECTOR = "const D=require('./dist/index.js');const d=new D();let s='';process.stdin.on('data',x=>s+=x).on('end',()=>{console.log(JSON.stringify(JSON.parse(s).map(u=>{const b=d.parse(u).bot;return [!!b,!!(b&&b.name)]})))})"
CUA = "const l=require('./crawler-user-agents.json').map(x=>new RegExp(x.pattern));let s='';process.stdin.on('data',d=>s+=d).on('end',()=>{console.log(JSON.stringify(JSON.parse(s).map(u=>[l.some(r=>r.test(u)),false])))})"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--crawlward', required=True)
    ap.add_argument('--catalogue', required=True, help="the catalogue's agents.yaml")
    ap.add_argument('--cache', required=True)
    ap.add_argument('--github', help='a directory of local clones named owner+name')
    ap.add_argument('--out')
    ap.add_argument('--misses', action='store_true', help="print each crawler string not named with a right purpose to stderr")
    a = ap.parse_args()
    os.makedirs(a.cache, exist_ok=True)

    cua = npm(a.cache, 'crawler-user-agents')
    cua_list = json.load(open(os.path.join(cua, 'crawler-user-agents.json')))
    dd = pypi(a.cache, 'device_detector')
    fixture = lambda n: yaml.safe_load(dd.read(f'device_detector/tests/fixtures/upstream/{n}')) or []
    crawlers = []  # (name, source, licence, [(ua, allowed purposes or None)])
    mon = {}
    for x in cua_list:
        allowed = set().union(*(MONPERRUS_TAGS.get(t, set()) for t in x.get('tags', []))) or None
        for i in x.get('instances', []):
            mon.setdefault(i.strip(), allowed)
    crawlers.append(('crawler-user-agents instances', f"npm crawler-user-agents@{NPM['crawler-user-agents'][0]} ({NPM['crawler-user-agents'][3]})", 'MIT', [(u, mon[u]) for u in distinct(mon)]))
    mat = {}
    for x in fixture('bots.yml'):
        mat.setdefault(str(x['user_agent']).strip(), MATOMO_CATEGORIES.get((x.get('bot') or {}).get('category')))
    crawlers.append(('device-detector bot fixtures', f"PyPI device_detector=={PYPI['device_detector'][0]} (matomo-org/device-detector's Tests/fixtures/bots.yml)", 'LGPL-3.0', [(u, mat[u]) for u in distinct(mat)]))
    isbot_fixtures = {}
    for path in GITHUB['omrilotan/isbot'][2]:
        body = github(a.cache, a.github, 'omrilotan/isbot', path)
        if body is not None:
            isbot_fixtures[path] = body
    if 'fixtures/crawlers.yml' in isbot_fixtures:
        c = yaml.safe_load(isbot_fixtures['fixtures/crawlers.yml'])
        crawlers.append(("isbot's crawler fixtures", f"github.com/omrilotan/isbot@{GITHUB['omrilotan/isbot'][0][:12]} fixtures/crawlers.yml", 'Unlicense', [(u, None) for u in distinct(s for v in c.values() for s in v)]))
    for path, label in [('fixtures/downloaded/stephenafamo.json', "stephenafamo's list (in isbot's fixtures)"), ('fixtures/downloaded/kikobeats.json', "Kikobeats' list (in isbot's fixtures)"), ('fixtures/downloaded/myip.ms.json', "myip.ms's list (in isbot's fixtures)"),
                        # held out: no catalogue entry was written from these two
                        ('fixtures/downloaded/user-agents.net.json', "user-agents.net's list (in isbot's fixtures), held out"),
                        ('fixtures/downloaded/ua-parser-js.json', "ua-parser-js' bot list (in isbot's fixtures), held out")]:
        if path in isbot_fixtures:
            crawlers.append((label, f"github.com/omrilotan/isbot@{GITHUB['omrilotan/isbot'][0][:12]} {path}", 'Unlicense (the list as isbot keeps it)', [(u, None) for u in distinct(json.loads(isbot_fixtures[path]))]))
    # a PHP library's own test list of crawler strings, one a line (cited by entries since 2026-12-06)
    commit, licence, (path,) = GITHUB['JayBizzle/Crawler-Detect']
    body = github(a.cache, a.github, 'JayBizzle/Crawler-Detect', path)
    if body is not None:
        crawlers.append(("Crawler-Detect's crawler fixtures", f"github.com/JayBizzle/Crawler-Detect@{commit[:12]} {path}", licence, [(u, None) for u in distinct(l.strip() for l in body.decode('utf-8', 'surrogateescape').split('\n') if l.strip())]))

    browsers = []
    ua_pkg = npm(a.cache, 'user-agents')
    browsers.append(('user-agents (Intoli)', f"npm user-agents@{NPM['user-agents'][0]}", 'BSD-2-Clause', distinct(x['userAgent'] for x in json.load(open(os.path.join(ua_pkg, 'dist/user-agents.json'))))))
    top = npm(a.cache, 'top-user-agents')
    browsers.append(('top-user-agents', f"npm top-user-agents@{NPM['top-user-agents'][0]}", 'MIT', distinct(json.load(open(os.path.join(top, 'src/index.json'))))))
    devices, others = [], []
    for n in dd.namelist():
        base = n.rsplit('/', 1)[-1]
        if n.startswith('device_detector/tests/fixtures/upstream/') and n.endswith('.yml') and re.match(r'(desktop|smartphone|tablet|phablet|tv|console|feature_phone|smart_display|wearable|car_browser)', base):
            for x in yaml.safe_load(dd.read(n)) or []:
                # a browser's string, or a mobile app's, a media player's, a library's (the fixture's client type)
                (devices if (x.get('client') or {}).get('type') == 'browser' else others).append(str(x['user_agent']))
    fixtures = f"PyPI device_detector=={PYPI['device_detector'][0]} (matomo-org/device-detector's device fixtures"
    browsers.append(('device-detector device fixtures: browsers', fixtures + ', client type browser)', 'LGPL-3.0', distinct(devices)))
    browsers.append(('device-detector device fixtures: apps, players, libraries', fixtures + ', the other client types: not browsers, not held to the target)', 'LGPL-3.0', distinct(others)))
    if 'fixtures/browsers.yml' in isbot_fixtures:
        b = yaml.safe_load(isbot_fixtures['fixtures/browsers.yml'])
        browsers.append(("isbot's browser fixtures", f"github.com/omrilotan/isbot@{GITHUB['omrilotan/isbot'][0][:12]} fixtures/browsers.yml", 'Unlicense', distinct(s for v in b.values() for s in v)))

    peers = [('isbot', ISBOT, npm(a.cache, 'isbot')), ('device-detector-js', DEVICE_DETECTOR, npm(a.cache, 'device-detector-js')), ("crawler-user-agents' patterns", CUA, cua)]
    lines = []
    say = lambda s='': (print(s), lines.append(s))
    say('| crawler corpus | strings | named | named, right purpose | recognised as a bot | passed as a person | of them, phones | phones aside: named | phones aside: bot | ' + ' | '.join(f'{p[0]}: bot' for p in peers) + ' | device-detector-js: named |')
    say('|---|---|---|---|---|---|---|---|---|' + '---|' * (len(peers) + 1))
    pct = lambda n, d: f'{100 * n / d:.1f}%' if d else '-'
    for name, source, licence, items in crawlers:
        uas = [u for u, _ in items]
        ours = crawlward(a.crawlward, uas)
        named = [r[0] != '-' and r[1] != 'unknown-bot' for r in ours]
        right = [n and (allowed is None or r[1] in allowed) for n, r, (_, allowed) in zip(named, ours, items)]
        bot = [r[0] != '-' for r in ours]
        if a.misses:
            for r, ok, (u, allowed) in zip(ours, right, items):
                if not ok:
                    print(f'    {name}: {r[0]} ({r[1]}; allowed {",".join(sorted(allowed)) if allowed else "any"}): {u[:160]}', file=sys.stderr)
        phones = sum(1 for b, u in zip(bot, uas) if not b and phone(u))
        row = f'| {name} | {len(uas)} | {pct(sum(named), len(uas))} | {pct(sum(right), len(uas))} | {pct(sum(bot), len(uas))} | {pct(len(uas) - sum(bot), len(uas))} | {phones} |'
        row += f' {pct(sum(named), len(uas) - phones)} | {pct(sum(bot), len(uas) - phones)} |'
        dd_named = 0
        for pname, script, cwd in peers:
            got = node_peer(script, uas, cwd)
            row += f' {pct(sum(1 for g in got if g[0]), len(uas))} |'
            if pname == 'device-detector-js':
                dd_named = sum(1 for g in got if g[1])
        say(row + f' {pct(dd_named, len(uas))} |')
    say()
    say('| browser corpus | strings | called a bot by crawlward | refused by the default policy | of them, bots by their operator | ' + ' | '.join(f'{p[0]}: bot' for p in peers) + ' |')
    say('|---|---|---|---|---|' + '---|' * len(peers))
    for name, source, licence, uas in browsers:
        ours = crawlward(a.crawlward, uas)
        bots = [r for r in ours if r[0] != '-']
        refused = [r for r in bots if r[1] in BLOCKED or r[2] == 'ranges']
        disputed = [u for r, u in zip(ours, uas) if r[0] != '-' and any(k in u for k in BOTS_IN_BROWSER_CORPORA)]
        row = f'| {name} | {len(uas)} | {len(bots)} ({100 * len(bots) / len(uas):.2f}%) | {len(refused)} | {len(disputed)} |'
        for pname, script, cwd in peers:
            got = node_peer(script, uas, cwd)
            n = sum(1 for g in got if g[0])
            row += f' {n} ({100 * n / len(uas):.2f}%) |'
        say(row)
        for r, u in zip(ours, uas):
            if r[0] != '-':
                why = next((w for k, w in BOTS_IN_BROWSER_CORPORA.items() if k in u), None)
                print(f'    called a bot: {r[0]} ({r[1]}, {r[3]}){"; " + why if why else ""}: {u[:140]}', file=sys.stderr)
    # ai.robots.txt's names
    body = github(a.cache, a.github, 'ai-robots-txt/ai.robots.txt', 'robots.json')
    if body is not None:
        names = list(json.loads(body))
        catalogue = yaml.safe_load(open(a.catalogue))['agents']
        tokens = {x['name'].lower() for x in catalogue} | {x.get('robots_token', '').lower() for x in catalogue}
        ours = crawlward(a.crawlward, names + [f'Mozilla/5.0 (compatible; {n}/1.0)' for n in names])
        known = 0
        for i, n in enumerate(names):
            hit = [r for r in (ours[i], ours[len(names) + i]) if r[0] != '-' and r[1] != 'unknown-bot']
            # robots.txt tokens have no spaces: 'ChatGPT Agent' is the agent ChatGPT-Agent
            if n.lower() in tokens or n.lower().replace(' ', '-') in tokens or hit:
                known += 1
            else:
                print(f'    not known: {n}', file=sys.stderr)
        say()
        say(f"ai.robots.txt's agents (robots.json at {GITHUB['ai-robots-txt/ai.robots.txt'][0][:12]}, MIT): {known} of {len(names)} known ({100 * known / len(names):.1f}%).")
    say()
    say('Corpora (distinct strings; downloaded by bench/identify):')
    for name, source, licence, _ in crawlers + browsers:
        say(f'- {name}: {source}, {licence}.')
    for pname, _, _ in peers:
        pkg = {'isbot': 'isbot', 'device-detector-js': 'device-detector-js', "crawler-user-agents' patterns": 'crawler-user-agents'}[pname]
        say(f'- peer {pname}: npm {pkg}@{NPM[pkg][0]} ({NPM[pkg][3]}, {NPM[pkg][2]}).')
    if a.out:
        with open(a.out, 'w') as f:
            f.write('\n'.join(lines) + '\n')


main()
