/** A model, adapter or array file that does not hold what it should. The message names the file and key. */
export class ModelFormatError extends Error {
  override name = 'ModelFormatError';
}
