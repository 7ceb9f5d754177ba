package drive

import "slices"

// The graph's control calls of its inputs: the watermark, the close of
// the open windows, the close, each on the roots and then, in order, on
// their readers.

// AdvanceWatermark moves the input's watermark (the roots'); the readers
// follow by their markers.
func (g *Graph) AdvanceWatermark(wm int64) (err error) {
	defer g.settle(&err)
	if g.isFed(0) {
		return g.feed(0, itemWatermark, wm, nil)
	}
	return g.controlOf(0, func(d *Driver) error { return d.AdvanceWatermark(wm) }, 0)
}

// CloseOpenWindows finalizes the open windows of the roots whose input
// has not ended, then, after those rows, every reader's (a join of two
// views whose other input ended acts on this one's alone).
func (g *Graph) CloseOpenWindows() (err error) {
	defer g.settle(&err)
	if g.closed() {
		return ErrClosed // as a closed driver refuses it
	}
	for i := range g.sources {
		if g.ended[i] {
			continue
		}
		if err := g.controlOf(i, (*Driver).CloseOpenWindows, itemCloseOpen); err != nil {
			return err
		}
	}
	if n := g.ijRoot(); n != nil && g.ended[n.input] && !g.ended[1] && !n.d.closed {
		// Its left stream ended (EndFirst), its right goes on.
		return g.controlNode(n, (*Driver).CloseOpenWindows, itemCloseOpen)
	}
	return nil
}

// Close ends the input (both inputs, when the graph reads two): the roots
// close, then each reader after its view's last rows.
func (g *Graph) Close() (err error) {
	defer g.settle(&err)
	if g.closed() {
		return nil // closed already: a second Close does nothing
	}
	ij := g.ijRoot()
	for i := range g.sources {
		if g.ended[i] {
			continue
		}
		g.ended[i] = true
		if err := g.controlOf(i, (*Driver).Close, itemClose); err != nil {
			return err
		}
	}
	if ij != nil && !ij.d.closed {
		// Its left stream ended before (EndFirst): both end now.
		g.ended[1] = true
		return g.controlNode(ij, (*Driver).Close, itemClose)
	}
	return nil
}

// closed reports whether every input has ended (Close).
func (g *Graph) closed() bool {
	ij := g.ijRoot()
	return !slices.Contains(g.ended[:max(1, len(g.sources))], false) && (ij == nil || ij.d.closed)
}

// controlNode is controlAll on root n alone.
func (g *Graph) controlNode(n *gnode, f func(*Driver) error, pass gitemKind) error {
	return g.controlAll([]*gnode{n}, f, pass)
}

// controlOf is control on the roots of input i (-1: every root).
func (g *Graph) controlOf(i int, f func(*Driver) error, pass gitemKind) error {
	switch {
	case i < 0:
		return g.controlAll(g.roots, f, pass)
	case g.isFed(i):
		return g.feed(i, pass, 0, nil) // a close, or a close of the open windows
	}
	return g.controlAll(g.rootsOf(i), f, pass)
}

// controlAll calls f on the roots ns in one step, then passes them (a
// close, a close of the open windows) to their readers.
func (g *Graph) controlAll(ns []*gnode, f func(*Driver) error, pass gitemKind) error {
	if g.fatal != nil {
		return g.fatal
	}
	g.begin(true)
	for _, n := range ns {
		g.setStep(n, g.step)
		if err := f(n.d); err != nil && !g.skip(n, err) {
			return g.failIfFatal(n, err)
		}
		g.marked(n)
		if pass != 0 {
			g.pass(n, pass)
		}
	}
	g.rootCall = false
	return g.pump()
}
