/**
 * Token classes for the PTX and SASS panes of perflab's `%%ptx` view: opcodes, registers,
 * predicates, addresses, numbers, directives, labels and comments. Pure: a line in, a list
 * of (text, kind) pieces out that cover the line exactly.
 */

export type AsmKind = 'op' | 'reg' | 'pred' | 'addr' | 'num' | 'dir' | 'label' | 'cmt';
export type Dialect = 'ptx' | 'sass';
export interface IPiece {
  text: string;
  kind: AsmKind | null;
}

const COMMENT = String.raw`(?<cmt>\/\/.*$|\/\*.*?\*\/)`;
const NUMBER = String.raw`(?<num>-?\b0[xX][0-9a-fA-F]+\b|-?\b\d+(?:\.\d+)?(?:[eE][-+]?\d+)?\b)`;

const PATTERNS: Record<Dialect, RegExp> = {
  ptx: new RegExp(
    [
      COMMENT,
      String.raw`(?<pred>@!?%p\d+)`,
      String.raw`(?<addr>\[[^\]]*\])`,
      String.raw`(?<reg>%[A-Za-z_][\w.]*(?:<\d+>)?)`,
      NUMBER,
      String.raw`(?<word>[.$]?[A-Za-z_$][\w.$]*:?)`
    ].join('|'),
    'g'
  ),
  sass: new RegExp(
    [
      COMMENT,
      String.raw`(?<pred>@!?U?P(?:\d|T)\b)`,
      String.raw`(?<addr>c\[[^\]]*\]\s*\[[^\]]*\]|\[[^\]]*\])`,
      String.raw`(?<reg>\b(?:U?R(?:\d+|Z)|U?P(?:\d|T)|SR_[A-Z0-9_.]+|SB\d)\b)`,
      NUMBER,
      String.raw`(?<word>[.$]?[A-Za-z_$][\w.$]*:?)`
    ].join('|'),
    'g'
  )
};

/** The first word of a line is its opcode (or a directive or label); later words are plain. */
function wordKind(word: string, first: boolean): AsmKind | null {
  if (word.endsWith(':')) {
    return 'label';
  }
  if (!first) {
    return null;
  }
  return word.startsWith('.') ? 'dir' : 'op';
}

export function tokenizeAsm(line: string, dialect: Dialect): IPiece[] {
  const pieces: IPiece[] = [];
  const pattern = new RegExp(PATTERNS[dialect]);
  let at = 0;
  let first = true;
  const push = (text: string, kind: AsmKind | null) => {
    const last = pieces[pieces.length - 1];
    if (kind === null && last && last.kind === null) {
      last.text += text;
    } else if (text) {
      pieces.push({ text, kind });
    }
  };
  for (const m of line.matchAll(pattern)) {
    push(line.slice(at, m.index), null);
    const groups = m.groups ?? {};
    const kind = (Object.keys(groups) as (AsmKind | 'word')[]).find(k => groups[k] !== undefined);
    if (kind === 'word') {
      push(m[0], wordKind(m[0], first));
      first = false;
    } else {
      push(m[0], kind ?? null);
    }
    at = m.index! + m[0].length;
  }
  push(line.slice(at), null);
  return pieces;
}

/** Which dialect a pane of the view holds, from its title (null: not assembly). */
export function paneDialect(title: string): Dialect | null {
  const t = title.trim().toUpperCase();
  if (t === 'PTX') {
    return 'ptx';
  }
  if (t === 'SASS') {
    return 'sass';
  }
  return null;
}
