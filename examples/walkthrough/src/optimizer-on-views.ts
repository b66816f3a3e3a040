/**
 * Layer 4, @fsdp-ts/optim alone: an optimizer built from Parameters whose data and grad are 1-D
 * views into shared flat buffers (what FSDP leaves after backward) steps exactly those elements.
 */
import { SGD } from '@fsdp-ts/optim';
import { Parameter, Storage, TensorView } from '@fsdp-ts/tensor';

export function optimizerOnViews(log: (line: string) => void) {
  const flat = Storage.allocate('float32', 8);
  flat.array().set([1, 1, 1, 1, 1, 1, 1, 1]);
  const gradients = Storage.allocate('float32', 8);
  gradients.array().set([1, 2, 3, 4, 5, 6, 7, 8]);
  // Two parameters of shape [2, 2]; this "rank" owns elements 0..2 of the first and 0..1 of the second.
  const first = new Parameter(new TensorView(flat, 0, [2, 2]), { name: 'first' });
  const second = new Parameter(new TensorView(flat, 4, [2, 2]), { name: 'second' });
  first.data = new TensorView(flat, 0, [3]);
  first.grad = new TensorView(gradients, 0, [3]);
  second.data = new TensorView(flat, 4, [2]);
  second.grad = new TensorView(gradients, 4, [2]);
  const optimizer = new SGD([first, second], { lr: 0.1 });
  optimizer.step();
  const after = Array.from(flat.array());
  log(
    `flat buffer after one SGD step (lr 0.1) over the views: ${JSON.stringify(after.map((value) => Number(value.toFixed(4))))}`,
  );
  log('elements 3, 6 and 7 are outside the views and did not move');
  return { after };
}
