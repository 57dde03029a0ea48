import { describe, expect, it } from 'vitest';

import { paneDialect, tokenizeAsm } from '../src/asm';

const kinds = (line: string, dialect: 'ptx' | 'sass') =>
  tokenizeAsm(line, dialect)
    .filter(p => p.kind !== null)
    .map(p => [p.text, p.kind]);

describe('tokenizeAsm', () => {
  it('covers the line exactly', () => {
    for (const line of ['\tld.global.v4.f32 \t{%f1, %f2}, [%rd4+16]; // x', '  IMAD R0, R3, c[0x0][0x0], R0 ;', '']) {
      expect(tokenizeAsm(line, 'sass').map(p => p.text).join('')).toBe(line);
      expect(tokenizeAsm(line, 'ptx').map(p => p.text).join('')).toBe(line);
    }
  });

  it('reads PTX', () => {
    expect(kinds('\tld.global.v4.f32 \t{%f1, %f2}, [%rd4+16]; // load', 'ptx')).toEqual([
      ['ld.global.v4.f32', 'op'],
      ['%f1', 'reg'],
      ['%f2', 'reg'],
      ['[%rd4+16]', 'addr'],
      ['// load', 'cmt']
    ]);
    expect(kinds('@%p1 bra \t$L__BB0_2;', 'ptx')).toEqual([
      ['@%p1', 'pred'],
      ['bra', 'op']
    ]);
    expect(kinds('.reg .b32 %r<5>;', 'ptx')).toEqual([
      ['.reg', 'dir'],
      ['%r<5>', 'reg']
    ]);
    expect(kinds('$L__BB0_2:', 'ptx')).toEqual([['$L__BB0_2:', 'label']]);
    expect(kinds('mov.u32 %r1, %tid.x;', 'ptx')).toEqual([
      ['mov.u32', 'op'],
      ['%r1', 'reg'],
      ['%tid.x', 'reg']
    ]);
  });

  it('reads SASS', () => {
    expect(kinds('@!P0 IMAD.WIDE R2, R0, 0x4, R2 ;  /* 0x000fca00078e0202 */', 'sass')).toEqual([
      ['@!P0', 'pred'],
      ['IMAD.WIDE', 'op'],
      ['R2', 'reg'],
      ['R0', 'reg'],
      ['0x4', 'num'],
      ['R2', 'reg'],
      ['/* 0x000fca00078e0202 */', 'cmt']
    ]);
    expect(kinds('LDG.E.128 R4, desc[UR4][R2.64] ;', 'sass')).toEqual([
      ['LDG.E.128', 'op'],
      ['R4', 'reg'],
      ['[UR4]', 'addr'],
      ['[R2.64]', 'addr']
    ]);
    expect(kinds('MOV R1, c[0x0][0x28] ;', 'sass')).toEqual([
      ['MOV', 'op'],
      ['R1', 'reg'],
      ['c[0x0][0x28]', 'addr']
    ]);
    expect(kinds('S2R R0, SR_TID.X ;', 'sass')).toEqual([
      ['S2R', 'op'],
      ['R0', 'reg'],
      ['SR_TID.X', 'reg']
    ]);
  });

  it('knows the panes by title', () => {
    expect(paneDialect('PTX')).toBe('ptx');
    expect(paneDialect('SASS')).toBe('sass');
    expect(paneDialect('Source (cell)')).toBeNull();
  });
});
