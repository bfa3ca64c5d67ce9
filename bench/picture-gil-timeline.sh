#!/usr/bin/env bash
# Redraws docs/report-gil-timeline.png: the gil study's spin cells at 6 tasks (seq, thread,
# fork), without and with --gil, cut from the HTML report's timeline figures (bars coloured by
# phase, with the report's legend) and shot by headless Chromium.
# Usage: bench/picture-gil-timeline.sh [CONCUR] [OUT.png]   (take it on a quiet machine)
set -euo pipefail
concur=${1:-target/release/concur}
out=${2:-docs/report-gil-timeline.png}
work=$(mktemp -d)
"$concur" run gil --quick -q --json "$work/gil.jsonl" --html "$work/gil.html" > /dev/null
python3 - "$work/gil.html" "$work/pic.html" <<'PY'
import re, sys
t = open(sys.argv[1]).read()
style = re.search(r'<style>.*?</style>', t, re.S).group(0)
out = ['<!DOCTYPE html><html><head><meta charset="utf-8">', style,
       '<style>body{margin:12px;width:780px;background:#fff}</style></head><body>']
for s in t.split('<section class="group"')[1:]:
    title = re.search(r'<h2>(.*?)</h2>', s).group(1)
    if 'spin' not in title:
        continue
    fig = s[s.find('<figure class="chart" data-kind="timeline"'):]
    fig = fig[:fig.find('</figure>')]
    cap = re.search(r'<figcaption>(.*?)</figcaption>', fig, re.S).group(1)
    out.append(f'<h3 style="font:bold 14px sans-serif;margin:10px 0 2px">{title}</h3>'
               f'<p style="font:12px sans-serif;margin:0 0 4px">{cap[cap.find("<span"):]}</p>')
    for cell in ['seq ×6', 'thread ×6', 'fork ×6']:
        m = re.search(r'<div class="tl" data-cell="%s">.*?</svg>\s*</div>' % re.escape(cell), fig, re.S)
        out.append(m.group(0))
out.append('</body></html>')
open(sys.argv[2], 'w').write('\n'.join(out))
PY
timeout 120 chromium --headless --no-sandbox --disable-gpu --hide-scrollbars \
  --user-data-dir="$work/profile" --window-size=800,1060 --screenshot="$out" "file://$work/pic.html" 2>/dev/null
echo "$out: $(wc -c < "$out") bytes (report: $work/gil.html)"
