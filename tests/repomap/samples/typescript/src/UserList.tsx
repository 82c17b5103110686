import { User } from './types';
import { UserRepository, createUser } from './users';

export function UserList(props: { users: User[] }) {
  return <ul>{props.users.map((u) => <li key={u.id}>{u.name}</li>)}</ul>;
}

export const seed = (repo: UserRepository) => {
  repo.save(createUser('1', 'Ada'));
  return repo.admins();
};
