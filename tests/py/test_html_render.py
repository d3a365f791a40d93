"""report.html rendered in headless Chromium: the page is not blank, the chart elements exist
(a scatter point per recipe, the Pareto path, memory bars, latency boxes), the recommended recipe
is marked, CPU timings are labelled, and hostile dataset strings are escaped.

The crafted report.json is rendered by the test_report program (PRECIS_RENDER_REPORT /
PRECIS_RENDER_DIR), so the test needs no `precis run`. Exits 77 (skipped) without Chromium; CI
installs it (cmake/debian-packages-test.txt)."""
import json
import os
import re
import shutil
import struct
import subprocess
import sys
import scratch  # tests/py/scratch.py: scratch under the build tree, removed on a signal
import zlib

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import report_fixtures as fx  # noqa: E402

HOSTILE_NAME = "<img src=x onerror=alert(1)>"
HOSTILE_DESCRIPTION = "<script>alert(1)</script>"


def decode_png(path):
    """(width, height, rows of RGB(A) tuples) for an 8-bit truecolor PNG, with zlib alone."""
    data = open(path, "rb").read()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, idat, width = 8, b"", None
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        if kind == b"IHDR":
            width, height, depth, color = struct.unpack(">IIBB", body[:10])
            assert depth == 8 and color in (2, 6), "expected 8-bit RGB or RGBA, found depth %d color %d" % (depth, color)
            channels = 3 if color == 2 else 4
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    raw = zlib.decompress(idat)
    stride = width * channels
    rows, prev = [], bytearray(stride)
    for y in range(height):
        filt = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - channels] if i >= channels else 0
            b = prev[i]
            c = prev[i - channels] if i >= channels else 0
            if filt == 1:
                line[i] = (line[i] + a) & 255
            elif filt == 2:
                line[i] = (line[i] + b) & 255
            elif filt == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif filt == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append(bytes(line))
        prev = line
    return width, height, channels, rows


def main():
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if not chromium:
        print("SKIP: chromium not installed (apt-get install chromium)")
        return 77
    build = os.environ.get("PRECIS_BUILD_DIR", "build")
    renderer = os.path.join(build, "tests", "test_report")
    if not os.path.exists(renderer):
        print("FAIL: %s not built" % renderer)
        return 1

    rows = fx.standard_rows()
    for recipe, err, ms in (("fp32", 1e-7, 1.0), ("bf16", 2e-3, 0.5), ("int8", 0.0, 0.3)):
        rows.append(fx.row(HOSTILE_NAME, recipe, err, ms, description=HOSTILE_DESCRIPTION))
    rows.append(fx.row(HOSTILE_NAME, "fp8", 0, 0, status="unsupported", reason="needs sm_89 <b>bold</b>"))
    doc = fx.report(rows)
    doc["settings"]["criteria"] = ["rel_fro<=0.01"]  # the run's target: the page names a recommendation

    failures = []
    with scratch.TemporaryDirectory() as tmp:
        src = fx.write(os.path.join(tmp, "in.json"), doc)
        out = os.path.join(tmp, "out")
        env = dict(os.environ, PRECIS_RENDER_REPORT=src, PRECIS_RENDER_DIR=out)
        run = subprocess.run([renderer], env=env, capture_output=True, text=True, timeout=120)
        if run.returncode != 0:
            print(run.stdout, run.stderr)
            return 1
        html = open(os.path.join(out, "report.html"), encoding="utf-8").read()
        try:  # the report.json written by the C printer follows docs/report-schema.json
            import jsonschema
        except ImportError:
            jsonschema = None
        if jsonschema is not None:
            source = os.environ.get("PRECIS_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))
            schema = json.load(open(os.path.join(source, "docs", "report-schema.json")))
            try:
                jsonschema.validate(json.load(open(os.path.join(out, "report.json"))), schema)
            except jsonschema.ValidationError as e:
                failures.append("report.json does not follow docs/report-schema.json: %s" % e.message)

        def check(cond, what):
            if not cond:
                failures.append(what)

        check("<script" not in html.lower(), "raw <script in the HTML")
        check("<img" not in html.lower(), "raw <img in the HTML")
        check("<b>bold" not in html, "raw markup from a row's reason")
        check("&lt;script&gt;alert(1)&lt;/script&gt;" in html, "escaped description missing")
        check("http://" not in html and "https://" not in html, "the page refers to the network")
        check("CPU timings" in html, "CPU timings not labelled")
        sections = re.findall(r'<section class="workload".*?</section>', html, re.S)
        check(len(sections) == 4, "expected 4 workload sections, found %d" % len(sections))
        for sec in sections:
            scatter = re.search(r'<svg class="scatter".*?</svg>', sec, re.S)
            check(scatter is not None, "a workload without a scatter")
            if not scatter:
                continue
            points = re.findall(r'<circle class="point[^"]*" data-recipe="([^"]*)"', scatter.group(0))
            ok_recipes = re.findall(r'<tr><td class="t" title="[^"]*">([^<]*)</td><td class="t">ok</td>', sec)
            check(sorted(points) == sorted(ok_recipes), "scatter points %s != ok rows %s" % (points, ok_recipes))
            check(re.search(r'<path class="pareto" d="M[\d. ]+( L[\d. ]+)*"', scatter.group(0)) is not None,
                  "no Pareto path")
            check('class="mem-bar" data-view="tensor"' in sec, "no tensor memory bars")
            check('class="mem-bar" data-view="tracked"' in sec, "no tracked memory bars")
            check('class="lat-box"' in sec, "no latency boxes")
        check(html.count('class="recommended-ring"') == 4, "recommended recipe not ringed in every scatter")
        check(re.search(r'class="point[^"]*recommended" data-recipe="bf16"', html) is not None,
              "bf16 (the known winner) not marked recommended")
        check(re.search(r'class="point fail[^"]*" data-recipe="int8"', html) is not None,
              "failing int8 row not drawn hollow")

        png = os.path.join(tmp, "report.png")
        shot = subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                               "--screenshot=" + png, "--window-size=1200,2000",
                               "file://" + os.path.join(out, "report.html")],
                              capture_output=True, text=True, timeout=180)
        if not os.path.exists(png):
            print(shot.stdout, shot.stderr)
            failures.append("chromium wrote no screenshot")
        else:
            width, height, channels, pixels = decode_png(png)
            check((width, height) == (1200, 2000), "screenshot is %dx%d" % (width, height))
            non_white, colors = 0, set()
            for line in pixels[::4]:
                for x in range(0, width * channels, 4 * channels):
                    px = line[x:x + 3]
                    if px != b"\xff\xff\xff":
                        non_white += 1
                    colors.add(px)
            sampled = (height // 4 + 1) * (width // 4)
            check(non_white > 0.02 * sampled, "screenshot nearly blank: %d of %d sampled pixels" % (non_white, sampled))
            check(len(colors) > 20, "screenshot has only %d colours" % len(colors))
            # The recommended ring (#e0a800) and the fp32 points (#1f77b4) are drawn.
            check(any(abs(c[0] - 0xe0) < 12 and abs(c[1] - 0xa8) < 12 and c[2] < 40 for c in colors if len(c) == 3),
                  "no recommended-ring colour in the screenshot")
            keep = os.path.join(build, "tests", "report-sample")
            os.makedirs(keep, exist_ok=True)
            shutil.copy(png, os.path.join(keep, "report.png"))
            shutil.copy(os.path.join(out, "report.html"), os.path.join(keep, "report.html"))
            print("screenshot: %s (%d non-white of %d sampled pixels, %d colours)" %
                  (os.path.join(keep, "report.png"), non_white, sampled, len(colors)))

    for f in failures:
        print("FAIL:", f)
    print("%d failures" % len(failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
