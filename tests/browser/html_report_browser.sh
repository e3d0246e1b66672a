#!/bin/sh
# The HTML report in a real browser (headless Chromium, tests/browser/check_html_report.py):
#  1. triage of a report with one planted NaN at (0,1,701,601) of Sq 1100 x Sk 900, so the
#     heatmaps are max-pooled (3 x 2 elements a pixel): renders without console errors, the
#     first-divergence marker of every implementation on that element's pixel;
#  2. the same page with the markers moved one cell, and with an external image and a
#     script added: the checks must fail;
#  3. the fault detection matrix: each faulty run's marker on the element the catalog expects.
# Screenshots go to ARTIFACTS. Exit 77 (CTest: Skipped) without Chromium.
#   html_report_browser.sh FLASHCORE_CHECK TESTS_BROWSER_DIR ARTIFACTS
cli=$1 here=$2 artifacts=$3
py=/usr/bin/python3
[ -x "$py" ] || py=python3
check="$py $here/check_html_report.py"
dir=$(mktemp -d) || exit 1
trap 'rm -rf "$dir"' EXIT
mkdir -p "$artifacts" || exit 1

$py "$here/write_planted_report.py" "$dir/planted.npz" 1100 900 64 0,1,701,601 || exit 1
"$cli" triage "$dir/planted.npz" --impl cpu-emulated --impl cpu-emulated-paged --html "$dir/triage.html" >"$dir/triage.txt"
rc=$?
[ $rc -eq 1 ] || { cat "$dir/triage.txt"; echo "triage exited $rc, expected 1 (a divergence)"; exit 1; }
$check "$dir/triage.html" --expect 0,1,701,601 --screenshot "$artifacts/html-report-triage.png"
rc=$?
[ $rc -eq 0 ] || exit $rc   # 77: no Chromium

$check "$dir/triage.html" --expect 0,1,701,601 --misplace >"$dir/misplaced.txt"
[ $? -eq 1 ] || { cat "$dir/misplaced.txt"; echo "markers moved one cell were not caught"; exit 1; }
sed 's|</body>|<img src="http://192.0.2.1/x.png"><script>document.title="x"</script></body>|' "$dir/triage.html" >"$dir/fetching.html"
$check "$dir/fetching.html" --expect 0,1,701,601 >"$dir/fetching.txt"
[ $? -eq 1 ] || { cat "$dir/fetching.txt"; echo "a page that fetches and runs a script was not caught"; exit 1; }
echo "misplaced markers and a fetching page are caught"

"$cli" faults --html "$dir/faults.html" >"$dir/faults.txt" || { cat "$dir/faults.txt"; exit 1; }
$check "$dir/faults.html" --expect-matrix --screenshot "$artifacts/html-report-faults.png"
