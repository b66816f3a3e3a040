/**
 * [Note: segments] An op over `count` elements split among `size` ranks gives rank r the
 * elements [floor(r * count / size), floor((r + 1) * count / size)): sizes differ by at most
 * one, any count works (zero included), and every rank computes the same split.
 */
export function segmentStart(index: number, count: number, size: number): number {
  return Math.floor((index * count) / size);
}

export function segmentBounds(index: number, count: number, size: number): [number, number] {
  return [segmentStart(index, count, size), segmentStart(index + 1, count, size)];
}
