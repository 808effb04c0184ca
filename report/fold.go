package report

import (
	"fmt"
	"math"
	"sort"
	"strings"

	"github.com/fsdpc/fsdpc/schedule"
	"github.com/fsdpc/fsdpc/schedule/diff"
)

// The page draws a step of any length in a fixed width, so a plan of
// millions of operations (grad_accum in the thousands) has most of them
// far narrower than a pixel: drawn one by one they made a page of
// hundreds of megabytes a browser cannot open. Operations narrower than a
// pixel that touch on one lane are folded into one rectangle whose title
// counts them by kind; an operation a pixel wide or more is always drawn
// on its own. A lane of chartWidth pixels then holds at most a few
// thousand rectangles, whatever the plan. The memory outline keeps, of
// each run of points on one vertical or one horizontal line at the
// drawing's resolution, only its ends.

// minOpWidth is the width, in pixels, below which an operation folds.
const minOpWidth = 1

// foldGap is how far apart, in pixels, two operations may be and still
// touch.
const foldGap = 0.5

// folder folds the narrow operations of each lane.
type folder struct {
	open  []int // per lane, the index of the rectangle still folding, or -1
	folds map[int]*fold
}

// fold is what one folded rectangle holds.
type fold struct {
	start, end float64
	kinds      map[schedule.OpKind]int
}

func newFolder(lanes int) *folder {
	f := &folder{open: make([]int, lanes), folds: map[int]*fold{}}
	for i := range f.open {
		f.open[i] = -1
	}
	return f
}

// add draws r, an operation of kind k from start to end on lane, folding
// it into the lane's open rectangle when both are narrow and touch. It
// reports whether it folded; otherwise r is the last of rects.
func (f *folder) add(rects *[]rect, lane int, r rect, k schedule.OpKind, start, end float64) bool {
	narrow := r.W < minOpWidth
	if i := f.open[lane]; i >= 0 && narrow && r.X <= (*rects)[i].X+(*rects)[i].W+foldGap {
		prev := &(*rects)[i]
		fd := f.folds[i]
		fd.kinds[k]++
		fd.end = end
		prev.W = max(prev.X+prev.W, r.X+r.W) - prev.X
		prev.Ops++
		if prev.Fill != r.Fill {
			prev.Fill = foldedFill
		}
		if prev.Group != r.Group {
			prev.Group = -1
		}
		return true
	}
	*rects = append(*rects, r)
	f.open[lane] = -1
	if narrow {
		f.open[lane] = len(*rects) - 1
		f.folds[len(*rects)-1] = &fold{start: start, end: end, kinds: map[schedule.OpKind]int{k: 1}}
	}
	return false
}

// foldedFill colours a fold of operations of several kinds.
const foldedFill = "#9e9e9e"

// finish titles the folded rectangles: how many operations of each kind,
// and when.
func (f *folder) finish(rects []rect) {
	for i, fd := range f.folds {
		r := &rects[i]
		if r.Ops < 2 {
			continue
		}
		kinds := make([]schedule.OpKind, 0, len(fd.kinds))
		for k := range fd.kinds {
			kinds = append(kinds, k)
		}
		sort.Slice(kinds, func(a, b int) bool { return kinds[a] < kinds[b] })
		var parts []string
		for _, k := range kinds {
			parts = append(parts, fmt.Sprintf("%s %s", commas(fd.kinds[k]), k))
		}
		r.Title = fmt.Sprintf("%s operations, each narrower than a pixel (%s), %s to %s", commas(r.Ops), strings.Join(parts, ", "), diff.Seconds(fd.start), diff.Seconds(fd.end))
	}
}

// outline is a polygon's points at the drawing's resolution (0.1 px),
// decimated by pixel column: of the points falling in one column it keeps
// the first, the lowest, the highest and the last, in their order, which
// draws the same envelope; a curve of millions of points (a memory
// profile over thousands of micro-batches) keeps at most four a pixel.
type outline struct {
	pts []point
	col []point // the current column's points
	at  float64 // the current column
}

type point struct{ x, y float64 }

// add appends a point.
func (o *outline) add(x, y float64) {
	p := point{math.Round(x*10) / 10, math.Round(y*10) / 10}
	if c := math.Floor(x); len(o.col) > 0 && c != o.at {
		o.flush()
	}
	if len(o.col) == 0 {
		o.at = math.Floor(x)
	}
	o.col = append(o.col, p)
}

// flush emits the current column's first, lowest, highest and last
// points in order, dropping repeats and the middle of three points on
// one horizontal line.
func (o *outline) flush() {
	lo, hi := 0, 0
	for i, p := range o.col {
		if p.y < o.col[lo].y {
			lo = i
		}
		if p.y > o.col[hi].y {
			hi = i
		}
	}
	keep := []int{0, min(lo, hi), max(lo, hi), len(o.col) - 1}
	for j, i := range keep {
		if j > 0 && i == keep[j-1] {
			continue
		}
		o.emit(o.col[i])
	}
	o.col = o.col[:0]
}

func (o *outline) emit(p point) {
	n := len(o.pts)
	if n > 0 && o.pts[n-1] == p {
		return
	}
	if n >= 2 && o.pts[n-2].y == o.pts[n-1].y && o.pts[n-1].y == p.y {
		o.pts[n-1] = p
		return
	}
	o.pts = append(o.pts, p)
}

// points returns the outline's points, the last column flushed.
func (o *outline) points() []point {
	if len(o.col) > 0 {
		o.flush()
	}
	return o.pts
}

func pointsString(pts []point) string {
	var b strings.Builder
	for i, p := range pts {
		if i > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "%.1f,%.1f", p.x, p.y)
	}
	return b.String()
}
