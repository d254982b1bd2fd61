// The PostgreSQL password from `password_file:`, read the way a root daemon reads any file a user
// might have planted: not through a symlink, not a FIFO or a device, owned by the daemon's user
// and readable by no one else (0600). The password is never part of a message.
import fs from "node:fs";
import { StoreError } from "./errors.js";

export function readPasswordFile(file: string): string {
  const refuse = (why: string) => new StoreError(`refusing password_file ${file}: ${why}`, "io");
  let fd: number;
  try {
    const { O_RDONLY, O_NOFOLLOW, O_NONBLOCK } = fs.constants;
    fd = fs.openSync(file, O_RDONLY | O_NOFOLLOW | O_NONBLOCK);
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code;
    throw refuse(
      code === "ELOOP"
        ? "it is a symbolic link"
        : code === "ENOENT"
          ? "no such file"
          : code === "EACCES"
            ? "permission denied"
            : String(code),
    );
  }
  try {
    const st = fs.fstatSync(fd);
    if (!st.isFile()) throw refuse("not a regular file");
    const euid = process.geteuid?.() ?? st.uid;
    if (st.uid !== euid) throw refuse(`owned by uid ${st.uid}, not by the daemon's user (${euid})`);
    if ((st.mode & 0o077) !== 0)
      throw refuse(
        `its mode is ${(st.mode & 0o777).toString(8)}: make it 0600 (chmod 600 ${file})`,
      );
    const text = fs.readFileSync(fd, "utf8");
    const password = text.replace(/\r?\n$/, "");
    if (password === "" || password.includes("\n"))
      throw refuse("it must hold the password alone, on one line");
    return password;
  } finally {
    fs.closeSync(fd);
  }
}
