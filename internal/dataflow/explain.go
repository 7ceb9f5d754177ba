package dataflow

import (
	"fmt"
	"strings"
)

// Explain renders the plan: each segment with the exchanges it reads,
// then its nodes, each with its inputs (producer, role and the placement
// needed) and its output placement.
func (p *Plan) Explain() string {
	var b strings.Builder
	for i, s := range p.Segments {
		fmt.Fprintf(&b, "segment %d", i)
		if len(s.Inputs) > 0 {
			var in []string
			for _, x := range s.Inputs {
				in = append(in, fmt.Sprintf("#%d", x))
			}
			fmt.Fprintf(&b, " (reads exchange %s)", strings.Join(in, ", "))
		}
		b.WriteString(":\n")
		for _, id := range s.Nodes {
			p.explainNode(&b, p.Node(id))
		}
	}
	return b.String()
}

func (p *Plan) explainNode(b *strings.Builder, n *Node) {
	fmt.Fprintf(b, "  #%d %s %s", n.ID, n.Kind, n.Name)
	for _, e := range n.Inputs {
		b.WriteString(" <- ")
		if e.Role != "" {
			b.WriteString(e.Role + " ")
		}
		fmt.Fprintf(b, "#%d", e.From)
		if e.Need.Kind != Any {
			fmt.Fprintf(b, " [%s]", e.Need)
		}
	}
	if n.Kind != Sink {
		fmt.Fprintf(b, "; out %s", n.Out)
	}
	b.WriteString("\n")
}
