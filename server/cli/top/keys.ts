/** What a key press asks `sluice top` to do. */
export type TopAction = 'up' | 'down' | 'open' | 'back' | 'sort' | 'quit'

/**
 * The actions in one chunk of raw terminal input (a chunk may hold several
 * keys when typed fast or pasted). Arrows, j/k, Enter, Esc/Backspace/←, s, q
 * and Ctrl-C; anything else is ignored.
 */
export function parseKeys(input: string): TopAction[] {
  const out: TopAction[] = []
  for (let i = 0; i < input.length; i++) {
    const c = input[i]!
    if (c === '\x1b') {
      const seq = input.slice(i, i + 3)
      if (seq === '\x1b[A' || seq === '\x1bOA') out.push('up')
      else if (seq === '\x1b[B' || seq === '\x1bOB') out.push('down')
      else if (seq === '\x1b[C' || seq === '\x1bOC') out.push('open')
      else if (seq === '\x1b[D' || seq === '\x1bOD') out.push('back')
      else {
        out.push('back') // Esc alone
        continue
      }
      i += 2
      continue
    }
    if (c === 'k') out.push('up')
    else if (c === 'j') out.push('down')
    else if (c === '\r' || c === '\n' || c === 'l') out.push('open')
    else if (c === '\x7f' || c === '\b' || c === 'h') out.push('back')
    else if (c === 's') out.push('sort')
    else if (c === 'q' || c === '\x03' || c === '\x04') out.push('quit')
  }
  return out
}
