package tui

import tea "charm.land/bubbletea/v2"

// onClick focuses the pane under the mouse, or makes the sidebar entry
// under it the target.
func (m *Model) onClick(msg tea.MouseClickMsg) {
	if msg.Button != tea.MouseLeft || m.helpOpen || m.dialogs.Len() > 0 {
		return
	}
	g := m.geo
	if g.sidebar.contains(msg.X, msg.Y) {
		if name := m.sidebarNameAt(g, msg.Y); name != "" {
			if err := m.setTarget(name); err != nil {
				m.fail(err)
			} else {
				m.info("target %s", name)
			}
		}
		return
	}
	for _, p := range g.panes {
		if p.r.contains(msg.X, msg.Y) && p.idx >= 0 {
			// A click on a terminal pane gives it the keys too.
			m.setFocus(p.idx, true)
			return
		}
	}
}

// onWheel scrolls the pane under the mouse, or the help.
func (m *Model) onWheel(msg tea.MouseWheelMsg) {
	if m.helpOpen {
		switch msg.Button {
		case tea.MouseWheelUp:
			m.helpTop = max(0, m.helpTop-3)
		case tea.MouseWheelDown:
			m.helpTop += 3
		}
		return
	}
	g := m.geo
	for _, p := range g.panes {
		if p.r.contains(msg.X, msg.Y) {
			p.pane.Update(msg)
			return
		}
	}
}

// sidebarNameAt is the target drawn on row y of the sidebar, if any.
func (m *Model) sidebarNameAt(g geometry, y int) string {
	list, start, listH, _ := m.sidebarLayout(g.sidebar.w, g.sidebar.h)
	if i := start + y; y < listH && i < len(list) {
		return list[i].name
	}
	return ""
}
