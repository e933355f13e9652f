// The one function of fs-ext (no types of its own) the file journal uses.
declare module 'fs-ext' {
  export function flockSync(fd: number, flags: 'sh' | 'ex' | 'shnb' | 'exnb' | 'un'): void;
}
