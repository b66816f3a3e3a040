/**
 * MNIST-like data generated in code (no download): 16×16 grey images of 10 classes. Each class is
 * a stroke pattern (segments of a seven-segment digit plus a class-specific diagonal); a sample is
 * its class pattern shifted by up to one pixel, with stroke thickness jitter and noise. The same
 * seed gives the same data in every process.
 */
import * as tf from '@tensorflow/tfjs-core';

export const imageSize = 16;
export const classCount = 10;

// Seven-segment encodings of the digits 0-9: top, upper-left, upper-right, middle, lower-left, lower-right, bottom.
const segments = [
  [1, 1, 1, 0, 1, 1, 1],
  [0, 0, 1, 0, 0, 1, 0],
  [1, 0, 1, 1, 1, 0, 1],
  [1, 0, 1, 1, 0, 1, 1],
  [0, 1, 1, 1, 0, 1, 0],
  [1, 1, 0, 1, 0, 1, 1],
  [1, 1, 0, 1, 1, 1, 1],
  [1, 0, 1, 0, 0, 1, 0],
  [1, 1, 1, 1, 1, 1, 1],
  [1, 1, 1, 1, 0, 1, 1],
] as const;

function random(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let value = Math.imul(state ^ (state >>> 15), state | 1);
    value ^= value + Math.imul(value ^ (value >>> 7), value | 61);
    return ((value ^ (value >>> 14)) >>> 0) / 4294967296;
  };
}

function drawSample(image: Float32Array, digit: number, next: () => number): void {
  const dx = Math.floor(next() * 3) - 1;
  const dy = Math.floor(next() * 3) - 1;
  const thick = next() < 0.5 ? 1 : 2;
  const put = (x: number, y: number) => {
    const px = x + dx;
    const py = y + dy;
    if (px >= 0 && px < imageSize && py >= 0 && py < imageSize) image[py * imageSize + px] = 1;
  };
  const horizontal = (y: number) => {
    for (let x = 4; x <= 11; x++) for (let t = 0; t < thick; t++) put(x, y + t);
  };
  const vertical = (x: number, from: number, to: number) => {
    for (let y = from; y <= to; y++) for (let t = 0; t < thick; t++) put(x + t, y);
  };
  const on = segments[digit]!;
  if (on[0]) horizontal(2);
  if (on[1]) vertical(3, 2, 7);
  if (on[2]) vertical(11, 2, 7);
  if (on[3]) horizontal(7);
  if (on[4]) vertical(3, 7, 13);
  if (on[5]) vertical(11, 7, 13);
  if (on[6]) horizontal(13);
  for (let index = 0; index < image.length; index++)
    image[index] = image[index]! * (0.7 + 0.3 * next()) + 0.25 * next();
}

/** `count` images [count, 16, 16, 1] and one-hot labels [count, 10]. */
export function makeDigits(count: number, seed: number): { x: tf.Tensor; y: tf.Tensor } {
  const next = random(seed);
  const pixels = new Float32Array(count * imageSize * imageSize);
  const labels = new Int32Array(count);
  for (let sample = 0; sample < count; sample++) {
    const digit = Math.floor(next() * classCount);
    labels[sample] = digit;
    drawSample(
      pixels.subarray(sample * imageSize * imageSize, (sample + 1) * imageSize * imageSize),
      digit,
      next,
    );
  }
  return tf.tidy(() => ({
    x: tf.tensor4d(pixels, [count, imageSize, imageSize, 1]),
    y: tf.oneHot(tf.tensor1d(labels, 'int32'), classCount).toFloat(),
  }));
}
