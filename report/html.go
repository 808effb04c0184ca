package report

import (
	_ "embed"
	"fmt"
	"html/template"
	"io"
)

//go:embed page.html
var pageSource string

var pageTemplate = template.Must(template.New("page").Funcs(template.FuncMap{
	"px":   func(f float64) string { return fmt.Sprintf("%.1f", f) },
	"add":  func(a, b float64) float64 { return a + b },
	"addi": func(a, b int) int { return a + b },
	"mul":  func(a int, b int) int { return a * b },
	"f":    func(i int) float64 { return float64(i) },
}).Parse(pageSource))

// Write renders one plan, or two and their difference, as a self-contained
// HTML page: no script, style, font or image is fetched from anywhere.
func Write(w io.Writer, plans ...Input) error {
	if len(plans) < 1 || len(plans) > 2 {
		return fmt.Errorf("a report shows one plan or two, not %d", len(plans))
	}
	pg := page{Title: "fsdpc report: " + plans[0].Name}
	for i, in := range plans {
		v, err := build(in, fmt.Sprintf("plan%d", i))
		if err != nil {
			return err
		}
		pg.Plans = append(pg.Plans, v)
	}
	if len(plans) == 2 {
		pg.Title = fmt.Sprintf("fsdpc report: %s → %s", plans[0].Name, plans[1].Name)
		d := newDifference(plans[0], plans[1])
		pg.Diff = &d
	}
	return pageTemplate.Execute(w, pg)
}
