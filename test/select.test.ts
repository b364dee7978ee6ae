// openBackend's choices (src/backend/select.ts): `cpu` is the CPU backend; `auto` takes WebGPU where there is an
// adapter and says in one line when that adapter is a software one (the CPU backend is often faster there), or
// falls back to the CPU backend with a line saying why; `webgpu` never falls back and never adds the hint.
import { describe, expect, it } from 'vitest';
import { openBackend } from '../src/backend/select.js';
import { gpu } from './webgpu.js';

async function opened(choice: 'cpu' | 'auto' | 'webgpu') {
  const lines: string[] = [];
  const backend = await openBackend(choice, (line) => lines.push(line));
  return { backend, lines };
}

describe('openBackend', () => {
  it('cpu: the CPU backend, nothing said', async () => {
    const { backend, lines } = await opened('cpu');
    expect(backend.name).toBe('cpu');
    expect(lines).toEqual([]);
  });

  it('auto: WebGPU where there is an adapter, with one line when it runs on the CPU; else the CPU backend, saying why', async () => {
    const { backend, lines } = await opened('auto');
    try {
      if (!gpu) {
        expect(backend.name).toBe('cpu');
        expect(lines).toHaveLength(1);
        expect(lines[0]).toMatch(/^populora: no WebGPU adapter \(.*\); using the cpu backend$/);
        return;
      }
      expect(backend.name).toBe('webgpu');
      expect(backend.softwareAdapter).toBe(gpu.softwareAdapter);
      if (backend.softwareAdapter) {
        expect(lines).toEqual([`populora: WebGPU runs on a software adapter (${backend.deviceDescription}); on few cores the cpu backend is often faster (a scenario's backend: cpu, a command's --backend cpu)`]);
      } else {
        expect(lines).toEqual([]);
      }
    } finally {
      backend.destroy();
    }
  });

  it.skipIf(!gpu)('webgpu: the adapter, whatever it is, without the hint', async () => {
    const { backend, lines } = await opened('webgpu');
    expect(backend.name).toBe('webgpu');
    expect(lines).toEqual([]);
    backend.destroy();
  });
});
