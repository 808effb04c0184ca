package report

import (
	"bytes"
	"context"
	"flag"
	"image"
	"image/color"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"
	"time"
)

var updatePicture = flag.Bool("update", false, "rewrite docs/report.png, the README's picture of a report")

// Window size of the screenshots, and of docs/report.png.
const shotW, shotH = 1280, 1800

// chromium finds Debian's chromium, or skips the browser tests saying why.
// .ci/run installs it (.ci/install-chromium) and sets
// FSDPC_REQUIRE_CHROMIUM=1 so that a missing browser fails there.
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("FSDPC_REQUIRE_CHROMIUM") != "" {
		t.Fatal("chromium is not installed and FSDPC_REQUIRE_CHROMIUM is set (run .ci/install-chromium)")
	}
	t.Skip("SKIP: chromium is not installed, so the report is not checked in a browser (apt-get install chromium, or run .ci/install-chromium)")
	return ""
}

func headless(t *testing.T, bin string, args ...string) []byte {
	t.Helper()
	return headlessAt(t, bin, shotW, shotH, args...)
}

// headlessAt runs chromium with a window of w×h CSS pixels.
func headlessAt(t *testing.T, bin string, w, h int, args ...string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	home := t.TempDir()
	all := append([]string{"--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--no-first-run",
		"--user-data-dir=" + filepath.Join(home, "profile"), "--window-size=" + strconv.Itoa(w) + "," + strconv.Itoa(h)}, args...)
	cmd := exec.CommandContext(ctx, bin, all...)
	cmd.Env = append(os.Environ(), "HOME="+home)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("chromium %v: %v\n%s", args, err, stderr.Bytes())
	}
	return stdout.Bytes()
}

func writePage(t *testing.T, inputs ...Input) string {
	t.Helper()
	var buf bytes.Buffer
	if err := Write(&buf, inputs...); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "report.html")
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestInBrowser loads reports in headless Chromium: the page's script runs
// to the end without an error and the DOM it leaves has what was drawn.
func TestInBrowser(t *testing.T) {
	bin := chromium(t)
	a, b := zooPlan(t, "llama3-8b"), zooPlan(t, "gpt2-124m")
	for name, inputs := range map[string][]Input{
		"one plan":  {{Name: "llama3-8b", Plan: a}},
		"two plans": {{Name: "llama3-8b", Plan: a}, {Name: "gpt2-124m", Plan: b}},
	} {
		t.Run(name, func(t *testing.T) {
			dom := headless(t, bin, "--dump-dom", "file://"+writePage(t, inputs...))
			if !regexp.MustCompile(`<body[^>]*data-ready="1"`).Match(dom) {
				t.Fatalf("the page's script did not finish:\n%.2000s", dom)
			}
			if m := regexp.MustCompile(`data-errors="([^"]*)"`).FindSubmatch(dom); m != nil {
				t.Errorf("JavaScript errors: %s", m[1])
			}
			counts := regexp.MustCompile(`<section class="plan" id="plan\d" data-ops="(\d+)"`).FindAllSubmatch(dom, -1)
			if len(counts) != len(inputs) {
				t.Fatalf("%d plan sections counted by the script, want %d", len(counts), len(inputs))
			}
			for i, c := range counts {
				if got, want := string(c[1]), strconv.Itoa(drawnOps(t, inputs[i].Plan)); got != want {
					t.Errorf("plan %d: the browser's DOM has %s operations, want %s", i, got, want)
				}
			}
			if !bytes.Contains(dom, []byte("operations drawn.")) {
				t.Error("the status line was not filled in")
			}
		})
	}
}

// layout is what a screenshot's structure is compared on: where the
// timeline's forward and backward spans and the memory curve's largest
// band first appear, and how much of the page is drawn on.
type layout struct {
	w, h                       int
	forwardRow, backwardRow    int
	memoryRow, inkPermille     int
	forwardCols, backwardWidth int
}

func near(c color.Color, r, g, b uint8) bool {
	cr, cg, cb, _ := c.RGBA()
	d := func(x uint32, y uint8) int { return int(x>>8) - int(y) }
	return abs(d(cr, r)) < 12 && abs(d(cg, g)) < 12 && abs(d(cb, b)) < 12
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}

func measure(img image.Image) layout {
	bd := img.Bounds()
	l := layout{w: bd.Dx(), h: bd.Dy(), forwardRow: -1, backwardRow: -1, memoryRow: -1}
	ink := 0
	for y := bd.Min.Y; y < bd.Max.Y; y++ {
		fwd, bwd, mem := 0, 0, 0
		for x := bd.Min.X; x < bd.Max.X; x++ {
			c := img.At(x, y)
			if !near(c, 255, 255, 255) {
				ink++
			}
			switch {
			case near(c, 0x4c, 0x78, 0xa8):
				fwd++
			case near(c, 0x7b, 0x5e, 0xa7):
				bwd++
			case near(c, 0xff, 0x7f, 0x0e): // optimizer state, the largest band
				mem++
			}
		}
		// Rows of the drawings, not of the legends' 10-pixel swatches.
		if fwd > 100 && l.forwardRow < 0 {
			l.forwardRow, l.forwardCols = y, fwd
		}
		if bwd > 100 && l.backwardRow < 0 {
			l.backwardRow, l.backwardWidth = y, bwd
		}
		if mem > 400 && l.memoryRow < 0 {
			l.memoryRow = y
		}
	}
	l.inkPermille = ink * 1000 / (l.w * l.h)
	return l
}

// TestScreenshot renders a report in headless Chromium and compares the
// picture's structure with docs/report.png: same size, the timeline above
// the memory curve, the bands within a few rows of where they were, the
// page neither blank nor flooded. -update rewrites docs/report.png.
func TestScreenshot(t *testing.T) {
	bin := chromium(t)
	page := writePage(t, zooInput(t, "llama3-8b"))
	shot := filepath.Join(t.TempDir(), "shot.png")
	headless(t, bin, "--screenshot="+shot, "file://"+page)
	raw, err := os.ReadFile(shot)
	if err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(bytes.NewReader(raw))
	if err != nil {
		t.Fatalf("the screenshot is not a PNG: %v", err)
	}
	got := measure(img)
	if got.w != shotW || got.h != shotH {
		t.Fatalf("screenshot %d×%d, want %d×%d", got.w, got.h, shotW, shotH)
	}
	if got.forwardRow < 0 || got.backwardRow < 0 || got.memoryRow < 0 {
		t.Fatalf("missing bands: %+v", got)
	}
	if !(got.forwardRow < got.memoryRow && got.backwardRow < got.memoryRow) {
		t.Errorf("the timeline is not above the memory curve: %+v", got)
	}
	if got.inkPermille < 50 || got.inkPermille > 600 {
		t.Errorf("%d‰ of the page is drawn on: blank or flooded", got.inkPermille)
	}
	const golden = "../docs/report.png"
	if *updatePicture {
		if err := os.WriteFile(golden, raw, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ref, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run go test ./report -run TestScreenshot -update)", err)
	}
	refImg, err := png.Decode(bytes.NewReader(ref))
	if err != nil {
		t.Fatal(err)
	}
	want := measure(refImg)
	t.Logf("structure: got %+v, docs/report.png %+v", got, want)
	const rows = 40 // fonts and zoo changes move things a little
	if got.w != want.w || got.h != want.h || abs(got.forwardRow-want.forwardRow) > rows || abs(got.backwardRow-want.backwardRow) > rows ||
		abs(got.memoryRow-want.memoryRow) > rows || abs(got.inkPermille-want.inkPermille) > 150 {
		t.Errorf("the screenshot's structure moved from docs/report.png:\n got %+v\nwant %+v\n(review, then go test ./report -run TestScreenshot -update)", got, want)
	}
}

// The first screen of a laptop: what a reviewer sees on opening the page.
const firstW, firstH = 1280, 800

// TestDifferenceFirstScreen opens a two-plan report in a 1280×800 window:
// the difference table, with its before, after and delta, is the first
// thing on the page and ends inside the first screen, by the DOM (where the
// page's script measured the table's bottom) and by the screenshot (the
// table's header colour in the picture's top rows, and a delta coloured as
// better or worse below it).
func TestDifferenceFirstScreen(t *testing.T) {
	bin := chromium(t)
	old, new := zooInput(t, "llama3-8b"), variantInput(t, "llama3-8b", "world_size = 8", "world_size = 16", `reduce_dtype = "fp32"`, `reduce_dtype = "bf16"`)
	page := writePage(t, old, new)

	dom := headlessAt(t, bin, firstW, firstH, "--dump-dom", "file://"+page)
	if !regexp.MustCompile(`<body[^>]*data-ready="1"`).Match(dom) {
		t.Fatalf("the page's script did not finish:\n%.2000s", dom)
	}
	m := regexp.MustCompile(`data-diff-bottom="(\d+)"`).FindSubmatch(dom)
	if m == nil {
		t.Fatal("the page has no difference table (no data-diff-bottom)")
	}
	bottom, _ := strconv.Atoi(string(m[1]))
	vp := regexp.MustCompile(`data-viewport="(\d+)x(\d+)"`).FindSubmatch(dom)
	if vp == nil {
		t.Fatal("the page's script did not measure the window")
	}
	// A window of 1280×800 shows a viewport of its width and a little less
	// than its height (headless Chromium 156 keeps 143 px of window frame
	// when dumping the DOM): the first screen is that viewport.
	vw, _ := strconv.Atoi(string(vp[1]))
	vh, _ := strconv.Atoi(string(vp[2]))
	if vw != firstW || vh < firstH*3/4 || vh > firstH {
		t.Fatalf("the viewport is %d×%d in a window of %d×%d", vw, vh, firstW, firstH)
	}
	if bottom <= 0 || bottom > vh {
		t.Errorf("the difference table ends %d px down the page, below the first screen of %d px", bottom, vh)
	}
	t.Logf("the difference table ends at %d px of a %d×%d first screen", bottom, vw, vh)
	if d, p := bytes.Index(dom, []byte(`id="diff"`)), bytes.Index(dom, []byte(`class="plan"`)); d < 0 || p < d {
		t.Errorf("the difference is not the first section (diff at %d, first plan at %d)", d, p)
	}

	shot := filepath.Join(t.TempDir(), "first.png")
	headlessAt(t, bin, firstW, firstH, "--screenshot="+shot, "file://"+page)
	raw, err := os.ReadFile(shot)
	if err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(bytes.NewReader(raw))
	if err != nil {
		t.Fatalf("the screenshot is not a PNG: %v", err)
	}
	if b := img.Bounds(); b.Dx() != firstW || b.Dy() != firstH {
		t.Fatalf("screenshot %d×%d, want %d×%d", b.Dx(), b.Dy(), firstW, firstH)
	}
	header, better := -1, -1
	for y := 0; y < firstH; y++ {
		head, green := 0, 0
		for x := 0; x < firstW; x++ {
			c := img.At(x, y)
			switch {
			case near(c, 0xdc, 0xe8, 0xf5): // table.diff th
				head++
			case near(c, 0x1a, 0x7f, 0x37): // td.better
				green++
			}
		}
		if head > 600 && header < 0 {
			header = y
		}
		if green > 0 && better < 0 && header >= 0 {
			better = y
		}
	}
	if header < 0 || header > firstH/4 {
		t.Errorf("the difference table's header is not at the top of the first screen (row %d)", header)
	}
	if better < 0 {
		t.Error("no delta coloured as better in the first screen (the step, exposed communication and memory fall)")
	}
}
