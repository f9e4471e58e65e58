package tui

import (
	"fmt"
	"strings"

	tea "charm.land/bubbletea/v2"
)

// keysLine is shown at the bottom of every screen.
const keysLine = "tab/1-6 views · ↑↓ jk pgup/dn g/G move · / filter · enter explain · esc close · q quit"

// nodesKeysLine is keysLine on the nodes view, where enter explains nothing and t groups.
const nodesKeysLine = "tab/1-6 views · ↑↓ jk pgup/dn g/G move · / filter · t group by topology · esc close · q quit"

// View implements tea.Model.
func (m *Model) View() tea.View {
	v := tea.NewView(m.Render())
	v.AltScreen = true
	return v
}

// Render returns the screen as plain text (View wraps it; tests read it).
func (m *Model) Render() string {
	var b strings.Builder
	for i, name := range tabNames {
		if i == m.tab {
			fmt.Fprintf(&b, "[%d %s] ", i+1, name)
		} else {
			fmt.Fprintf(&b, " %d %s  ", i+1, name)
		}
	}
	b.WriteString("\n")
	if m.snap == nil {
		b.WriteString("waiting for the informer caches …\n")
		b.WriteString(truncate(m.keys(), m.width))
		return b.String()
	}
	rows := m.Visible()
	total := len(m.rows[m.tab])
	status := fmt.Sprintf("%s: %d", tabNames[m.tab], len(rows))
	if m.filter != "" || m.filtering {
		status += fmt.Sprintf(" of %d matching /%s", total, m.filter)
		if m.filtering {
			status += "▏"
		}
	}
	status += fmt.Sprintf("   snapshot %d", m.version)
	b.WriteString(truncate(status, m.width) + "\n")
	h := m.listHeight()
	off := m.offset[m.tab]
	for i := off; i < min(off+h, len(rows)); i++ {
		mark := "  "
		if i == m.cursor[m.tab] && m.tab != TabOverview {
			mark = "> "
		}
		if rows[i].Pending {
			mark += "! "
		} else {
			mark += "  "
		}
		b.WriteString(truncate(mark+rows[i].Text, m.width) + "\n")
	}
	for i := len(rows) - off; i < h; i++ {
		b.WriteString("\n")
	}
	if len(m.detail) > 0 {
		b.WriteString(strings.Repeat("─", max(m.width, 1)) + "\n")
		for _, l := range m.detail[:min(len(m.detail), m.height/2)] {
			b.WriteString(truncate(l, m.width) + "\n")
		}
	}
	switch {
	case m.confirm != nil:
		b.WriteString(truncate("Mark "+m.confirm.String()+" unhealthy? y to confirm, any other key cancels", m.width) + "\n")
	case m.message != "":
		b.WriteString(truncate(m.message, m.width) + "\n")
	}
	last := m.keys()
	if len(rows) > h {
		last = fmt.Sprintf("rows %d–%d of %d · ", off+1, min(off+h, len(rows)), len(rows)) + last
	}
	b.WriteString(truncate(last, m.width)) // one line, whatever the width
	return b.String()
}

func (m *Model) keys() string {
	line := keysLine
	if m.tab == TabNodes {
		line = nodesKeysLine
	}
	if m.inject == nil {
		return line + " · read-only"
	}
	return line + " · F fault (asks first)"
}

func truncate(s string, w int) string {
	if w <= 0 {
		return s
	}
	r := []rune(s)
	if len(r) <= w {
		return s
	}
	return string(r[:max(w-1, 0)]) + "…"
}
