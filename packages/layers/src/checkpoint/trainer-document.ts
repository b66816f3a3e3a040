/** The model topology, as the `modelTopology` of tfjs's model.json (`model.toJSON(null, false)`). */
export const MODEL_DOCUMENT = 'layers/model.json';
/** What the trainer records about itself (a TrainerDocument). */
export const TRAINER_DOCUMENT = 'layers/trainer';

/** The `layers/trainer` document of a layers checkpoint (see [Note: layers checkpoint names]). */
export interface TrainerDocument {
  strategy: string;
  worldSize: number;
  /** Optimizer steps taken when it was saved; loadCheckpoint restores the trainer's count. */
  steps: number;
  /** The tfjs name and shape of `trainable/<i>` and `non-trainable/<j>`. */
  trainable: { name: string; shape: number[] }[];
  nonTrainable: { name: string; shape: number[] }[];
}
